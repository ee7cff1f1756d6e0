//! The data file and the panel store on real files and real mappings.
//! Memory pressure is scripted (an injected RSS source and clock), so no
//! test needs root, cgroups or swap, and each plays out the same way every
//! time. Files are a few KiB.

use memadapt::file::{self, HEADER_LEN};
use memadapt::{
    DataFile, ElementType, Error, Header, PanelStore, Policy, StoreStats, Verdict, Writer,
};
use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Not a multiple of any page size, and odd, so no element but bytes
/// divides it evenly except where a test says so.
const ODD: u64 = 5001;

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

/// `panels` panels of `size` bytes; panel p filled with byte `p + 1`.
fn byte_file(path: &Path, panels: usize, size: u64) -> Header {
    let data: Vec<Vec<u8>> = (0..panels)
        .map(|p| vec![p as u8 + 1; size as usize])
        .collect();
    let slices: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    file::from_slices(path, &slices).expect("file created")
}

/// A pattern no other panel or fresh file holds.
fn pattern(panel: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ (panel as u8 + 0xA5))
        .collect()
}

/// Panel `panel` as it is in the file, read with plain `pread`.
fn on_disk(path: &Path, header: &Header, panel: usize) -> Vec<u8> {
    let mut buf = vec![0; header.panel_size as usize];
    fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut buf, header.panel_offset(panel))
        .unwrap();
    buf
}

/// A clock that advances one second per reading (one per access).
fn ticking() -> impl FnMut() -> Duration + Send {
    let mut t = 0;
    move || {
        t += 1;
        Duration::from_secs(t)
    }
}

/// A scripted machine: RSS is `other` plus the mapped panels, but the
/// panels get at most `limit` bytes (the kernel takes the rest); the test
/// moves the limit to script pressure. `u64::MAX`: no pressure.
fn scripted(other: u64, limit: Arc<AtomicU64>) -> impl FnMut(u64) -> io::Result<u64> + Send {
    move |mapped| Ok(other + mapped.min(limit.load(Ordering::SeqCst)))
}

#[test]
fn round_trip_create_open_read() {
    let dir = temp();
    let path = dir.path().join("v.panels");
    let values = |p: usize| {
        (0..1000)
            .map(|i| (p * 1000 + i) as f64 * 0.5)
            .collect::<Vec<f64>>()
    };
    let mut w = Writer::create(&path, Header::new(3, 8000).with_element(ElementType::F64)).unwrap();
    for p in [2, 0, 1] {
        w.write_panel(p, &values(p)).unwrap();
    }
    let header = w.finish().unwrap();
    assert!(header.is_complete());
    assert_eq!((header.panels, header.panel_size), (3, 8000));

    let mut store = PanelStore::open(&path).unwrap();
    assert_eq!(store.header(), &header);
    assert_eq!((store.panels(), store.element()), (3, ElementType::F64));
    for p in 0..3 {
        assert_eq!(store.panel_as::<f64>(p).unwrap(), values(p), "panel {p}");
    }
    // A cyclic sweep goes round.
    let order: Vec<usize> = (0..4).map(|_| store.next_panel().unwrap().0).collect();
    assert_eq!(order, [0, 1, 2, 0]);
    let (_, bytes) = store.next_panel().unwrap();
    assert_eq!(bytes.len(), 8000);
    assert_eq!(
        bytes[..8],
        500.0f64.to_ne_bytes(),
        "panel 1 starts with 1000 × 0.5"
    );

    // The wrong type and a panel that does not exist are errors that say so.
    let err = store.panel_as::<f32>(0).unwrap_err();
    assert!(matches!(err, Error::ElementMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("hold f64, not f32"), "{err}");
    let err = store.panel(3).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("panel 3 does not exist: {} has panels 0..3", path.display())
    );
    let stats: StoreStats = store.close().unwrap();
    assert_eq!(
        stats.accesses,
        3 + 4 + 1,
        "refused accesses are not counted"
    );

    // Conventional out-of-core reading, no mapping.
    let data = DataFile::open(&path, false).unwrap();
    let mut buf = vec![0.0f64; 1000];
    data.read_panel(2, &mut buf).unwrap();
    assert_eq!(buf, values(2));
    let err = data.read_panel(2, &mut buf[..10]).unwrap_err();
    assert!(
        err.to_string().contains("must be 8000 bytes, got 80"),
        "{err}"
    );
}

#[test]
fn missing_file_error_names_the_path() {
    let dir = temp();
    let path = dir.path().join("nowhere").join("m.panels");
    let err = PanelStore::open(&path).err().expect("no such file");
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("does not exist"), "{msg}");
    // Creating in a missing directory names the path too.
    let err = file::create(&path, 10, 1).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot create data file {}", path.display())),
        "{err}"
    );
}

#[test]
fn truncated_file_error_says_expected_and_actual_bytes() {
    let dir = temp();
    let path = dir.path().join("t.panels");
    let header = byte_file(&path, 3, ODD);
    let full = header.file_size();
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(full - 100).unwrap();
    let err = PanelStore::open(&path).err().unwrap();
    match &err {
        Error::Truncated {
            expected, actual, ..
        } => assert_eq!((*expected, *actual), (full, full - 100)),
        other => panic!("not Truncated: {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "describes {full} bytes but the file has {}",
            full - 100
        )),
        "{msg}"
    );
    // Cut inside the header: the header's own size is what is missing.
    f.set_len(20).unwrap();
    let err = DataFile::open(&path, false).unwrap_err();
    assert!(
        matches!(err, Error::Truncated { expected, actual: 20, .. } if expected == HEADER_LEN as u64),
        "{err:?}"
    );
}

#[test]
fn wrong_magic_or_version_is_not_a_data_file() {
    let dir = temp();
    let path = dir.path().join("w.panels");
    fs::write(&path, vec![b'x'; 9000]).unwrap();
    let err = PanelStore::open(&path).err().unwrap();
    assert!(matches!(err, Error::NotDataFile { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!(
            "{} is not a memadapt data file: it does not start with \"MEMADAPT\"",
            path.display()
        )),
        "{err}"
    );
    fs::write(&path, b"").unwrap();
    let err = PanelStore::open(&path).err().unwrap();
    assert!(
        err.to_string()
            .contains("0 bytes, fewer than the 64-byte header"),
        "{err}"
    );

    // A version from the future.
    byte_file(&path, 2, 100);
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&7u32.to_le_bytes(), 8).unwrap();
    let err = PanelStore::open(&path).err().unwrap();
    assert!(
        matches!(
            err,
            Error::UnsupportedVersion {
                found: 7,
                supported: 1,
                ..
            }
        ),
        "{err:?}"
    );
    // A damaged header: P = 0.
    byte_file(&path, 2, 100);
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&0u64.to_le_bytes(), 16).unwrap();
    let err = PanelStore::open(&path).err().unwrap();
    assert!(
        err.to_string().contains("damaged header: panel count 0"),
        "{err}"
    );
}

#[test]
fn zero_panels_or_zero_panel_size_are_refused() {
    let dir = temp();
    let path = dir.path().join("z.panels");
    let err = file::create(&path, 0, 4).unwrap_err();
    assert!(matches!(err, Error::ZeroPanelSize { .. }), "{err:?}");
    assert!(err.to_string().contains("panel size is 0 bytes"), "{err}");
    let err = file::create(&path, 4096, 0).unwrap_err();
    assert!(matches!(err, Error::NoPanels { .. }), "{err:?}");
    let err = file::from_slices::<f64>(&path, &[]).unwrap_err();
    assert!(matches!(err, Error::NoPanels { .. }), "{err:?}");
    let err = file::from_slices::<u8>(&path, &[&[1, 2], &[3]]).unwrap_err();
    assert!(err.to_string().contains("panel 1 of"), "{err}");
}

#[test]
fn a_file_whose_writing_stopped_is_refused() {
    let dir = temp();
    let path = dir.path().join("i.panels");
    let mut w = file::create(&path, 100, 2).unwrap();
    w.write_panel(0, &[1u8; 100]).unwrap();
    drop(w); // no finish: as after a full disk or a crash
    let err = PanelStore::open(&path).err().unwrap();
    assert!(matches!(err, Error::Incomplete { .. }), "{err:?}");
}

#[test]
fn panel_size_not_a_multiple_of_the_page_size_works() {
    let dir = temp();
    let path = dir.path().join("odd.panels");
    let header = byte_file(&path, 3, ODD);
    let page = file::page_size();
    for p in 0..3 {
        assert_eq!(header.panel_offset(p) % page, 0, "panel {p} page-aligned");
    }
    assert_eq!(header.slot_size(), ODD.next_multiple_of(page));
    assert_eq!(fs::metadata(&path).unwrap().len(), header.file_size());

    let mut store = PanelStore::options().read_write().open(&path).unwrap();
    assert_eq!(store.resident_panel_size(), ODD.next_multiple_of(page));
    for p in 0..3 {
        let panel = store.panel(p).unwrap();
        assert_eq!(panel.len(), ODD as usize);
        assert!(panel.iter().all(|&b| b == p as u8 + 1), "panel {p}");
    }
    // The last byte of a panel is its own, not the next panel's first.
    store.panel_mut(1).unwrap()[ODD as usize - 1] = 0xEE;
    assert_eq!(store.panel(2).unwrap()[0], 3);
    let err = store.panel_as::<u16>(0).unwrap_err();
    assert!(
        err.to_string()
            .contains("5001 bytes, not a whole number of u16"),
        "{err}"
    );
    store.close().unwrap();
    let got = on_disk(&path, &header, 1);
    assert_eq!((got[0], got[ODD as usize - 1]), (2, 0xEE));
    assert_eq!(on_disk(&path, &header, 2)[0], 3);
}

#[test]
fn a_written_then_evicted_panel_is_not_lost() {
    let dir = temp();
    let path = dir.path().join("e.panels");
    let header = byte_file(&path, 3, ODD);
    let len = ODD as usize;
    // A budget of one panel: every access to another panel evicts.
    let mut store = PanelStore::options()
        .read_write()
        .fixed(1)
        .open(&path)
        .unwrap();
    store
        .panel_mut(0)
        .unwrap()
        .copy_from_slice(&pattern(0, len));
    assert_eq!(store.panel(1).unwrap()[0], 2);
    assert!(!store.is_mapped(0), "panel 0 was evicted");
    assert_eq!(store.stats().write_backs, 1);
    assert_eq!(on_disk(&path, &header, 0), pattern(0, len), "written back");
    assert_eq!(store.panel(0).unwrap(), pattern(0, len), "re-mapped");
    // A clean panel is not written back again.
    let _ = store.panel(2).unwrap();
    assert_eq!(store.stats().write_backs, 1);

    // Changes still mapped at close and at drop are written too.
    store
        .panel_mut(2)
        .unwrap()
        .copy_from_slice(&pattern(2, len));
    store.close().unwrap();
    let mut store = PanelStore::options().read_write().open(&path).unwrap();
    store
        .panel_mut(1)
        .unwrap()
        .copy_from_slice(&pattern(1, len));
    drop(store);
    let mut store = PanelStore::open(&path).unwrap();
    for p in 0..3 {
        assert_eq!(
            store.panel(p).unwrap(),
            pattern(p, len),
            "panel {p} after reopening"
        );
    }
}

#[test]
fn read_only_store_refuses_panel_mut() {
    let dir = temp();
    let path = dir.path().join("r.panels");
    byte_file(&path, 2, 100);
    let mut store = PanelStore::open(&path).unwrap();
    let err = store.panel_mut(1).unwrap_err();
    assert!(matches!(err, Error::ReadOnly { panel: 1, .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{} is open read-only: panel 1", path.display())),
        "{msg}"
    );
    assert!(msg.contains("read_write()"), "{msg}");
    assert!(store.next_panel_mut().is_err());
    // The refusal changed nothing; reading still works.
    assert_eq!(store.stats().accesses, 0);
    assert_eq!(store.panel(1).unwrap(), [2; 100]);
}

/// P = 4 with no pressure: all four panels come in during the first sweep
/// (each written with its pattern); then the scripted limit leaves room for
/// two. Returns the store and the limit.
fn four_panels_then_pressure(path: &Path) -> (PanelStore, Arc<AtomicU64>) {
    byte_file(path, 4, ODD);
    let other = 1 << 20;
    let limit = Arc::new(AtomicU64::new(u64::MAX));
    let mut store = PanelStore::options()
        .read_write()
        .rss_source(scripted(other, limit.clone()))
        .clock(ticking())
        .open(path)
        .unwrap();
    let r = store.resident_panel_size();
    assert_eq!(
        store.desired_rss(),
        other + r,
        "other memory measured at open"
    );
    for p in 0..4 {
        let (i, panel) = store.next_panel_mut().unwrap();
        assert_eq!(i, p);
        panel.copy_from_slice(&pattern(p, ODD as usize));
    }
    assert_eq!((store.panels_in(), store.mapped_count()), (4, 4));
    assert_eq!(store.stats().probes, 3);
    limit.store(2 * r, Ordering::SeqCst);
    (store, limit)
}

#[test]
fn scripted_rss_drop_unmaps_and_a_later_probe_maps_more() {
    let dir = temp();
    let path = dir.path().join("s.panels");
    let (mut store, limit) = four_panels_then_pressure(&path);
    let r = store.resident_panel_size();

    // The next access sees RSS fall: a shortage, panels unmapped.
    let _ = store.next_panel().unwrap();
    let last = *store.timeline().samples().last().unwrap();
    assert!(matches!(last.verdict, Verdict::Shortage { .. }), "{last:?}");
    assert!(store.panels_in() < 4, "panels_in fell");
    assert!(store.mapped_count() < 4, "panels were unmapped");
    let low = store.panels_in();
    // No cascade: with the limit steady, the count holds.
    for _ in 0..8 {
        let _ = store.next_panel().unwrap();
        assert_eq!(store.panels_in(), low);
    }

    // Memory comes back. A probe waits for the delay (at most ten sweeps
    // after the shortage, §4.2), then maps one panel more.
    limit.store(u64::MAX, Ordering::SeqCst);
    let mut accesses = 0;
    while store.panels_in() == low {
        let _ = store.next_panel().unwrap();
        accesses += 1;
        assert!(accesses < 10 * 4 + 8, "no probe after {accesses} accesses");
    }
    assert!(accesses > 4, "the probe waited for the delay ({accesses})");
    assert_eq!(store.panels_in(), low + 1);
    for _ in 0..100 {
        let _ = store.next_panel().unwrap();
    }
    assert_eq!(
        (store.panels_in(), store.mapped_count()),
        (4, 4),
        "all back"
    );

    let stats = store.stats();
    assert_eq!(stats.shortages, 1);
    assert!(stats.probes >= 4, "{stats:?}");
    let timeline = store.timeline();
    let events: Vec<&str> = timeline.samples().iter().map(|s| s.event()).collect();
    let shortage = events.iter().position(|&e| e == "shortage").unwrap();
    assert!(events[shortage..].contains(&"probe"), "{events:?}");
    let first = timeline.samples()[0];
    assert_eq!(
        (first.t, first.panel, first.rss),
        (Duration::from_secs(1), 0, 1 << 20)
    );
    let csv = timeline.to_csv();
    assert_eq!(csv.lines().count(), timeline.samples().len() + 1);
    assert!(
        csv.lines()
            .any(|l| l.ends_with(&format!(",shortage,{r},1"))),
        "{csv}"
    );
    store.close().unwrap();
}

#[test]
fn panels_written_then_shed_for_a_shortage_are_not_lost() {
    let dir = temp();
    let path = dir.path().join("d.panels");
    let (mut store, _limit) = four_panels_then_pressure(&path);
    let _ = store.next_panel().unwrap();
    let shed: Vec<usize> = (0..4).filter(|&p| !store.is_mapped(p)).collect();
    assert!(!shed.is_empty());
    assert_eq!(store.stats().write_backs, shed.len() as u64);
    let header = *store.header();
    for &p in &shed {
        assert_eq!(
            on_disk(&path, &header, p),
            pattern(p, ODD as usize),
            "panel {p}"
        );
    }
    // Re-mapped after eviction, and after closing and reopening.
    for p in 0..4 {
        assert_eq!(
            store.panel(p).unwrap(),
            pattern(p, ODD as usize),
            "panel {p}"
        );
    }
    store.close().unwrap();
    let mut store = PanelStore::open(&path).unwrap();
    for p in 0..4 {
        assert_eq!(
            store.panel(p).unwrap(),
            pattern(p, ODD as usize),
            "panel {p}"
        );
    }
}

#[test]
fn the_real_rss_source_runs_a_sweep() {
    // The default source (/proc/self/statm) and clock. Other tests run in
    // parallel threads of this process, so the RSS is noisy: only the
    // data and the bookkeeping are checked, not the adaptation.
    let dir = temp();
    let path: PathBuf = dir.path().join("real.panels");
    byte_file(&path, 4, 3 * 4096);
    let mut store = PanelStore::options()
        .policy(Policy::Lru)
        .open(&path)
        .unwrap();
    for sweep in 0..3 {
        for _ in 0..4 {
            let (i, panel) = store.next_panel().unwrap();
            assert!(
                panel.iter().all(|&b| b == i as u8 + 1),
                "sweep {sweep} panel {i}"
            );
        }
    }
    assert!(store.timeline().samples().iter().all(|s| s.rss > 0));
    assert!(store.mapped_count() >= 1 && store.mapped_count() <= store.panels_in());
    assert_eq!(store.stats().accesses, 12);
}

/// What the C ABI's `memadapt_pin` rests on: a pinned panel is never
/// unmapped, so a raw pointer to it stays valid across accesses.
#[test]
fn a_pinned_panel_stays_mapped_until_unpinned() {
    let dir = temp();
    let path = dir.path().join("p.panels");
    byte_file(&path, 3, ODD);
    // A budget of one panel: without the pin every access would evict 0.
    let mut store = PanelStore::options().fixed(1).open(&path).unwrap();
    store.pin(0).unwrap();
    let address = store.panel(0).unwrap().as_ptr();
    for p in [1, 2, 1] {
        assert_eq!(store.panel(p).unwrap()[0], p as u8 + 1);
        assert!(store.is_mapped(0) && store.is_pinned(0), "after panel {p}");
    }
    assert_eq!(store.mapped_count(), 2, "the budget of one, plus the pin");
    assert_eq!(store.panel(0).unwrap().as_ptr(), address, "never remapped");
    store.unpin(0).unwrap();
    let err = store.unpin(0).unwrap_err();
    assert!(matches!(err, Error::NotPinned { panel: 0, .. }), "{err:?}");
    assert!(err.to_string().contains("is not pinned"), "{err}");
    assert!(matches!(
        store.unpin(3).unwrap_err(),
        Error::PanelOutOfRange { panel: 3, .. }
    ));
    let _ = store.panel(2).unwrap();
    assert!(!store.is_mapped(0), "unpinned, it is a victim again");
    assert_eq!((store.mapped_count(), store.pinned_count()), (1, 0));

    // Adaptive, under a shortage: the pinned panel is not shed.
    let path = dir.path().join("q.panels");
    let (mut store, _limit) = four_panels_then_pressure(&path);
    store.pin(3).unwrap();
    assert!(store.stats().shortages == 1 && store.panels_in() < 4);
    for _ in 0..16 {
        let _ = store.next_panel().unwrap();
        assert!(store.is_mapped(3));
    }
    store.close().unwrap();
}

/// memgang's allowance file: the store keeps no more panels than fit in
/// it, before any RSS shortage, and grows again once it is raised (here
/// with no memory pressure at all: the limit alone sheds).
#[test]
fn the_allowance_file_caps_the_panels_kept() {
    let dir = temp();
    let path = dir.path().join("a.panels");
    byte_file(&path, 6, ODD);
    let allowance = dir.path().join("allowance");
    let other = 1 << 20;
    let mut store = PanelStore::options()
        .rss_source(scripted(other, Arc::new(AtomicU64::new(u64::MAX))))
        .clock(ticking())
        .allowance_file(&allowance)
        .open(&path)
        .unwrap();
    let r = store.resident_panel_size();
    for _ in 0..6 {
        let _ = store.next_panel().unwrap();
    }
    assert_eq!(store.mapped_count(), 6, "no file: no limit");
    fs::write(&allowance, format!("{}\n", other + 2 * r)).unwrap();
    let _ = store.next_panel().unwrap();
    assert_eq!((store.panels_in(), store.mapped_count()), (2, 2));
    for _ in 0..30 {
        let _ = store.next_panel().unwrap();
        assert!(store.mapped_count() <= 2, "grew past the allowance");
    }
    fs::write(&allowance, "not a number").unwrap();
    let mut accesses = 0;
    while store.panels_in() == 2 {
        let _ = store.next_panel().unwrap();
        accesses += 1;
        assert!(accesses < 100, "an unreadable allowance still limits");
    }
}
