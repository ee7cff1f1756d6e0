//! The C ABI: the dense matrix-vector example (`examples/c/dense_mv.c`)
//! compiled with `cc` against the libraries cargo built, static and
//! shared, and run; the header's constants and struct layouts compared
//! with the library's; and the error paths and pins through the extern
//! functions themselves, called from Rust as C would call them.
//!
//! Needs a C compiler (`$CC`, else `cc`). Without one the C tests fail
//! and say so; `MEMADAPT_SKIP_C_TESTS=1` skips them instead, loudly, for
//! machines that only build the Rust side.

mod common;

use common::{c_compiler, compile, crate_dir, library_dir};
use memadapt::capi::*;
use std::ffi::{c_void, CStr, CString};
use std::mem::{offset_of, size_of};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};
use std::ptr;

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn dense_mv_example_matches_in_core_static_and_shared() {
    let Some(cc) = c_compiler() else { return };
    let lib = library_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = crate_dir().join("examples/c/dense_mv.c");
    let static_exe = dir.path().join("dense_mv_static");
    let archive = lib.join("libmemadapt.a");
    compile(
        &cc,
        &[&source],
        &[archive.to_str().unwrap(), "-lpthread", "-ldl", "-lm"],
        &static_exe,
    );
    let shared_exe = dir.path().join("dense_mv_shared");
    // The program asks for the SONAME, libmemadapt.so.0; cargo writes only
    // libmemadapt.so, so the run finds it through the link install.sh
    // also makes.
    let links = dir.path().join("lib");
    std::fs::create_dir(&links).unwrap();
    std::os::unix::fs::symlink(lib.join("libmemadapt.so"), links.join("libmemadapt.so.0")).unwrap();
    let (search, rpath) = (
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", links.display()),
    );
    compile(
        &cc,
        &[&source],
        &[&search, "-lmemadapt", &rpath, "-lm"],
        &shared_exe,
    );

    // n = 768: a 4.5 MiB matrix in 12 panels of 64 rows (384 KiB, whole
    // pages); 4 sweeps.
    for exe in [&static_exe, &shared_exe] {
        let data = dir.path().join("a.panels");
        let timeline = dir.path().join("timeline.csv");
        let output = Command::new(exe)
            .args(["768", "12", "4"])
            .arg(&data)
            .arg(&timeline)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&output);
        assert!(
            output.status.success(),
            "{} exited with {}:\n{stdout}\n{stderr}",
            exe.display(),
            output.status
        );
        assert!(
            stdout.contains("dense_mv: n=768 panels=12 (393216 bytes each) iterations=4"),
            "{stdout}"
        );
        assert!(stdout.contains("accesses=48 "), "{stdout}");
        assert!(
            stdout.lines().any(|l| l == "dense_mv: check ok"),
            "{stdout}"
        );
        let csv = std::fs::read_to_string(&timeline).unwrap();
        assert!(csv.starts_with("t_s,panel,rss_bytes,drss_bytes"), "{csv}");
        assert_eq!(csv.lines().count(), 1 + 48, "one line per access");
    }

    // A mismatch or a failure is an exit status, not a silent success.
    let output = Command::new(&static_exe)
        .args(["8", "2", "1"])
        .arg(dir.path().join("missing-dir/a.panels"))
        .output()
        .unwrap();
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("memadapt_file_create: cannot create data file")
            && stderr.contains("missing-dir/a.panels"),
        "{stderr}"
    );
}

/// The header's enum values, struct sizes and field offsets, printed by
/// a C program compiled against it, against the library's; and every
/// function the header declares linked from the static library.
#[test]
fn header_matches_the_library() {
    let Some(cc) = c_compiler() else { return };
    macro_rules! offsets {
        ($rust:ty, $c:literal: $($field:ident),*) => {
            [
                (format!("sizeof({})", $c), size_of::<$rust>()),
                $((format!("offsetof({}, {})", $c, stringify!($field)), offset_of!($rust, $field)),)*
            ]
        };
    }
    let mut expected: Vec<(String, i64)> = [
        ("MEMADAPT_OK", MEMADAPT_OK),
        ("MEMADAPT_E_NULL", MEMADAPT_E_NULL),
        ("MEMADAPT_E_INVALID", MEMADAPT_E_INVALID),
        ("MEMADAPT_E_NOT_FOUND", MEMADAPT_E_NOT_FOUND),
        ("MEMADAPT_E_IO", MEMADAPT_E_IO),
        ("MEMADAPT_E_DISK_FULL", MEMADAPT_E_DISK_FULL),
        ("MEMADAPT_E_FORMAT", MEMADAPT_E_FORMAT),
        ("MEMADAPT_E_TRUNCATED", MEMADAPT_E_TRUNCATED),
        ("MEMADAPT_E_INCOMPLETE", MEMADAPT_E_INCOMPLETE),
        ("MEMADAPT_E_RANGE", MEMADAPT_E_RANGE),
        ("MEMADAPT_E_READ_ONLY", MEMADAPT_E_READ_ONLY),
        ("MEMADAPT_E_MAP", MEMADAPT_E_MAP),
        ("MEMADAPT_E_WRITE_BACK", MEMADAPT_E_WRITE_BACK),
        ("MEMADAPT_E_RSS", MEMADAPT_E_RSS),
        ("MEMADAPT_E_INTERNAL", MEMADAPT_E_INTERNAL),
        ("MEMADAPT_READ_ONLY", MEMADAPT_READ_ONLY as i32),
        ("MEMADAPT_READ_WRITE", MEMADAPT_READ_WRITE as i32),
        ("MEMADAPT_POLICY_MRU", MEMADAPT_POLICY_MRU as i32),
        ("MEMADAPT_POLICY_LRU", MEMADAPT_POLICY_LRU as i32),
        ("MEMADAPT_POLICY_PRIORITY", MEMADAPT_POLICY_PRIORITY as i32),
        ("MEMADAPT_RSS_ONLY", MEMADAPT_RSS_ONLY as i32),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), i64::from(value)))
    .collect();
    use memadapt::ElementType::*;
    for (name, element) in [
        ("BYTES", Bytes),
        ("I8", I8),
        ("U16", U16),
        ("I16", I16),
        ("U32", U32),
        ("I32", I32),
        ("U64", U64),
        ("I64", I64),
        ("F32", F32),
        ("F64", F64),
    ] {
        expected.push((format!("MEMADAPT_{name}"), i64::from(element.tag())));
    }
    let layouts = offsets!(MemadaptStats, "struct memadapt_stats": accesses, maps, unmaps,
        write_backs, shortages, panels_shed, probes, panels_in, mapped, pinned, desired_rss)
    .into_iter()
    .chain(
        offsets!(MemadaptInfo, "struct memadapt_info": panels, panel_bytes,
        resident_panel_bytes, element, flags),
    );
    expected.extend(layouts.map(|(expr, value)| (expr, value as i64)));

    let header = std::fs::read_to_string(crate_dir().join("include/memadapt.h")).unwrap();
    let functions: Vec<&str> = header
        .lines()
        .filter_map(|l| {
            let l = l
                .strip_prefix("int ")
                .or_else(|| l.strip_prefix("const char *"))?;
            l.strip_prefix("memadapt_")?;
            l.split_once('(').map(|(name, _)| name)
        })
        .collect();
    assert_eq!(functions.len(), 24, "{functions:?}");

    let mut c = String::from("#include <memadapt.h>\n#include <stddef.h>\n#include <stdio.h>\n");
    c += "typedef void (*any_fn)(void);\nany_fn volatile functions[] = {\n";
    for f in &functions {
        c += &format!("    (any_fn){f},\n");
    }
    c += "};\nint main(void)\n{\n";
    for (expr, _) in &expected {
        c += &format!("    printf(\"%lld\\n\", (long long)({expr}));\n");
    }
    c += "    return 0;\n}\n";
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("layout.c");
    std::fs::write(&source, c).unwrap();
    let exe = dir.path().join("layout");
    let archive = library_dir().join("libmemadapt.a");
    compile(
        &cc,
        &[&source],
        &[archive.to_str().unwrap(), "-lpthread", "-ldl", "-lm"],
        &exe,
    );
    let output = Command::new(&exe).output().unwrap();
    assert!(output.status.success());
    let printed: Vec<i64> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(printed.len(), expected.len());
    for ((expr, rust), c) in expected.iter().zip(printed) {
        assert_eq!(c, *rust, "{expr}: the header says {c}, the library {rust}");
    }
}

// ---- the extern functions called directly ----

fn last_error() -> String {
    // SAFETY: the library's NUL-terminated, thread-local string.
    unsafe { CStr::from_ptr(memadapt_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

#[test]
fn a_missing_file_is_a_status_and_a_message_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such.panels");
    let mut store: *mut MemadaptStore = ptr::NonNull::dangling().as_ptr();
    // SAFETY: valid arguments, as C would pass them.
    let status =
        unsafe { memadapt_open(c_path(&path).as_ptr(), MEMADAPT_READ_ONLY, 0, &mut store) };
    assert_eq!(status, MEMADAPT_E_NOT_FOUND);
    assert!(store.is_null(), "the out-pointer is cleared on failure");
    let msg = last_error();
    assert!(
        msg.starts_with(&format!(
            "memadapt_open: data file {} does not exist",
            path.display()
        )),
        "{msg}"
    );
    assert!(
        msg.contains("memadapt_file_create"),
        "says what to do: {msg}"
    );

    // NULL arguments are named; closing NULL is a no-op, as free(NULL).
    // SAFETY: NULL is what is being tested.
    let status = unsafe { memadapt_open(ptr::null(), 0, 0, &mut store) };
    assert_eq!(status, MEMADAPT_E_NULL);
    assert_eq!(
        last_error(),
        "memadapt_open: argument `path` is NULL: pass a valid pointer"
    );
    let status = unsafe { memadapt_open(c_path(&path).as_ptr(), 0, 0, ptr::null_mut()) };
    assert_eq!(status, MEMADAPT_E_NULL);
    assert!(last_error().contains("`out`"));
    assert_eq!(unsafe { memadapt_close(ptr::null_mut()) }, MEMADAPT_OK);
    let status = unsafe { memadapt_flush(ptr::null_mut()) };
    assert_eq!(status, MEMADAPT_E_NULL);
    assert!(last_error().starts_with("memadapt_flush: argument `store`"));

    // Bad flags are refused with the file named.
    let status = unsafe { memadapt_open(c_path(&path).as_ptr(), 0x40, 0, &mut store) };
    assert_eq!(status, MEMADAPT_E_INVALID);
    assert!(
        last_error().contains("unknown flags 0x40"),
        "{}",
        last_error()
    );

    // A file whose writer was aborted is refused as incomplete.
    let mut writer: *mut MemadaptWriter = ptr::null_mut();
    let cpath = c_path(&path);
    assert_eq!(
        unsafe { memadapt_file_create(cpath.as_ptr(), 100, 2, MEMADAPT_BYTES_TAG, &mut writer) },
        MEMADAPT_OK
    );
    let status = unsafe { memadapt_file_write_panel(writer, 0, [0u8; 99].as_ptr().cast(), 99) };
    assert_eq!(status, MEMADAPT_E_INVALID, "one byte short");
    assert!(
        last_error().contains("must be 100 bytes, got 99"),
        "{}",
        last_error()
    );
    assert_eq!(unsafe { memadapt_file_abort(writer) }, MEMADAPT_OK);
    let status = unsafe { memadapt_open(cpath.as_ptr(), 0, 0, &mut store) };
    assert_eq!(status, MEMADAPT_E_INCOMPLETE);
    assert!(last_error().contains("was not completely written"));
}

/// `MEMADAPT_BYTES`, as C passes an enum value.
const MEMADAPT_BYTES_TAG: i32 = 0;

#[test]
fn a_pinned_panel_pointer_survives_accesses_and_changes_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = c_path(&dir.path().join("pin.panels"));
    const SIZE: usize = 5001; // not a whole number of pages
    let mut writer = ptr::null_mut();
    // SAFETY, this whole test: valid arguments, as C would pass them, and
    // panel pointers used only while the API says they are valid.
    unsafe {
        assert_eq!(
            memadapt_file_create(
                path.as_ptr(),
                SIZE as u64,
                3,
                MEMADAPT_BYTES_TAG,
                &mut writer
            ),
            MEMADAPT_OK
        );
        for p in 0..3u8 {
            let data = [p + 1; SIZE];
            let status = memadapt_file_write_panel(writer, p.into(), data.as_ptr().cast(), SIZE);
            assert_eq!(status, MEMADAPT_OK);
        }
        assert_eq!(memadapt_file_finish(writer), MEMADAPT_OK);

        // One panel at most, but panel 0 pinned.
        let mut store = ptr::null_mut();
        let flags = MEMADAPT_READ_WRITE | MEMADAPT_POLICY_LRU;
        assert_eq!(
            memadapt_open(path.as_ptr(), flags, 1, &mut store),
            MEMADAPT_OK
        );
        let mut info = MemadaptInfo::default();
        assert_eq!(memadapt_info(store, &mut info), MEMADAPT_OK);
        assert_eq!(
            (info.panels, info.panel_bytes, info.flags),
            (3, SIZE as u64, flags)
        );
        assert_eq!(memadapt_pin(store, 0), MEMADAPT_OK);
        let (mut zero, mut len): (*mut c_void, usize) = (ptr::null_mut(), 0);
        assert_eq!(
            memadapt_panel_mut(store, 0, &mut zero, &mut len),
            MEMADAPT_OK
        );
        assert_eq!(len, SIZE);
        std::slice::from_raw_parts_mut(zero.cast::<u8>(), len).fill(0xAB);
        for p in [1, 2, 1] {
            let (mut other, mut len): (*const c_void, usize) = (ptr::null(), 0);
            assert_eq!(memadapt_panel(store, p, &mut other, &mut len), MEMADAPT_OK);
            assert_eq!(*other.cast::<u8>(), p as u8 + 1);
            // Panel 0's pointer is still good: it is pinned.
            assert!(std::slice::from_raw_parts(zero.cast::<u8>(), SIZE)
                .iter()
                .all(|&b| b == 0xAB));
        }
        let mut stats = MemadaptStats::default();
        assert_eq!(memadapt_stats(store, &mut stats), MEMADAPT_OK);
        assert_eq!((stats.mapped, stats.pinned, stats.panels_in), (2, 1, 1));
        assert_eq!(stats.accesses, 5);

        assert_eq!(memadapt_unpin(store, 0), MEMADAPT_OK);
        assert_eq!(memadapt_unpin(store, 0), MEMADAPT_E_INVALID);
        assert!(last_error().contains("panel 0 of"), "{}", last_error());
        assert_eq!(memadapt_unpin(store, 3), MEMADAPT_E_RANGE);
        assert_eq!(memadapt_set_priority(store, 9, 1), MEMADAPT_E_RANGE);
        assert!(last_error().contains("has panels 0..3"), "{}", last_error());
        let (mut p, mut index) = (ptr::null(), 0);
        assert_eq!(
            memadapt_next_panel(store, &mut index, &mut p, &mut len),
            MEMADAPT_OK
        );
        assert_eq!(index, 0, "the sweep starts at panel 0");

        // memadapt_pin_panel_mut: pinned and handed out in one access.
        let before = stats.accesses + 1;
        let (mut two, mut len2): (*mut c_void, usize) = (ptr::null_mut(), 0);
        assert_eq!(
            memadapt_pin_panel_mut(store, 2, &mut two, &mut len2),
            MEMADAPT_OK
        );
        assert_eq!(len2, SIZE);
        *two.cast::<u8>() = 0xCD;
        assert_eq!(memadapt_panel(store, 1, &mut p, &mut len), MEMADAPT_OK);
        assert_eq!(*two.cast::<u8>(), 0xCD, "still mapped: pinned");
        assert_eq!(memadapt_stats(store, &mut stats), MEMADAPT_OK);
        assert_eq!((stats.accesses, stats.pinned), (before + 2, 1));
        assert_eq!(memadapt_unpin(store, 2), MEMADAPT_OK);
        assert_eq!(
            memadapt_pin_panel(store, 7, &mut p, &mut len),
            MEMADAPT_E_RANGE
        );
        assert!(p.is_null() && len == 0, "out parameters cleared");
        assert_eq!(memadapt_close(store), MEMADAPT_OK);

        // The change is in the file; a read-only store refuses writes.
        assert_eq!(memadapt_open(path.as_ptr(), 0, 0, &mut store), MEMADAPT_OK);
        let mut data = ptr::null();
        assert_eq!(memadapt_panel(store, 0, &mut data, &mut len), MEMADAPT_OK);
        assert!(std::slice::from_raw_parts(data.cast::<u8>(), len)
            .iter()
            .all(|&b| b == 0xAB));
        let mut out = ptr::null_mut();
        assert_eq!(
            memadapt_panel_mut(store, 0, &mut out, &mut len),
            MEMADAPT_E_READ_ONLY
        );
        assert!(out.is_null() && len == 0, "out-parameters cleared");
        assert!(
            last_error().contains("MEMADAPT_READ_WRITE"),
            "{}",
            last_error()
        );
        let csv = c_path(&dir.path().join("no-dir/t.csv"));
        assert_eq!(
            memadapt_write_timeline_csv(store, csv.as_ptr()),
            MEMADAPT_E_IO
        );
        assert!(
            last_error()
                .starts_with("memadapt_write_timeline_csv: cannot create the timeline file"),
            "{}",
            last_error()
        );
        assert_eq!(memadapt_close(store), MEMADAPT_OK);
    }
}

/// The shared library names its ABI (SONAME libmemadapt.so.0), and
/// install.sh installs the versioned file with the links a loader and a
/// linker look for.
#[test]
fn shared_library_has_a_soname_and_installs_with_versioned_links() {
    let lib = library_dir().join("libmemadapt.so");
    let out = Command::new("readelf")
        .arg("-d")
        .arg(&lib)
        .output()
        .expect("readelf (binutils) runs");
    let dynamic = String::from_utf8_lossy(&out.stdout);
    assert!(
        dynamic.contains("Library soname: [libmemadapt.so.0]"),
        "{}: {dynamic}",
        lib.display()
    );
    let prefix = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .arg(crate_dir().join("install.sh"))
        .arg(prefix.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    let libdir = prefix.path().join("lib");
    let version = env!("CARGO_PKG_VERSION");
    assert!(libdir.join(format!("libmemadapt.so.{version}")).is_file());
    for (link, to) in [
        ("libmemadapt.so.0", format!("libmemadapt.so.{version}")),
        ("libmemadapt.so", "libmemadapt.so.0".to_string()),
    ] {
        let target = std::fs::read_link(libdir.join(link)).unwrap();
        assert_eq!(target, Path::new(&to), "{link}");
    }
}
