//! The swap testbed: memgang time-shares jobs whose combined memory does not
//! fit in RAM, and the pages of the jobs that are switched out have to go
//! somewhere. On a node without swap there is no real memory pressure to
//! schedule against, so this module creates, enables, inspects and removes a
//! swap *file* (no repartitioning needed), and measures what the device under
//! it can do so that switch costs can be compared with the best case.
//!
//! Everything goes through syscalls (`swapon(2)`, `swapoff(2)`,
//! `fallocate(2)`, `statvfs(3)`, `O_DIRECT` I/O); the swap header is simple
//! enough to write ourselves, so `mkswap` is not needed.
//!
//! Safety rule: memgang only ever deletes swap files it created itself. Its
//! headers carry the label [`SWAP_LABEL`], and [`down`] refuses anything else,
//! so pointing it at an admin's own swap cannot destroy it.

use crate::error::{Error, Result};
use crate::proc::unescape_octal;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where the CLI puts its swap file unless told otherwise: under /var/lib
/// because it is persistent, disk-backed and root-owned (never tmpfs, which
/// cannot hold swap).
pub const DEFAULT_SWAP_PATH: &str = "/var/lib/memgang/swapfile";

/// Volume label written into every swap header memgang creates. [`down`]
/// deletes only files carrying it. Shows up in `blkid` / `swapon --show=LABEL`.
pub const SWAP_LABEL: &str = "memgang";

const PROC_SWAPS: &str = "/proc/swaps";

/// Signature of a version-1 Linux swap area, in the last 10 bytes of page 0.
const SWAP_MAGIC: &[u8; 10] = b"SWAPSPACE2";

/// Offsets inside page 0 of `union swap_header` (include/linux/swap.h):
/// 1024 bytes of boot bits, then version, last_page, nr_badpages (u32 each),
/// a 16-byte UUID and a 16-byte volume label.
const HDR_VERSION: usize = 1024;
const HDR_LAST_PAGE: usize = 1028;
const HDR_NR_BADPAGES: usize = 1032;
const HDR_UUID: usize = 1036;
const HDR_LABEL: usize = 1052;
const HDR_LABEL_LEN: usize = 16;

/// mkswap's minimum: below ten pages the area (one of which is the header)
/// is useless and the kernel may reject it.
const MIN_SWAP_PAGES: u64 = 10;

/// Space left free on the filesystem after our file is written: a full root
/// filesystem breaks logging, package managers and memgang's own state files,
/// and root would otherwise eat into the reserved blocks meant for recovery.
const FREE_SPACE_HEADROOM: u64 = 256 << 20;

/// I/O unit for zero-filling and for the bandwidth probe. 1 MiB is far above
/// per-syscall overhead and the device's request size, so it measures the
/// sequential best case the paging cost model wants as its upper bound.
const IO_CHUNK: usize = 1 << 20;

/// A page fault reads one page: the unit of the random-read probe.
const RANDOM_IO: usize = 4096;

/// Where [`TestSwap`] puts its files: persistent and disk-backed on every
/// distribution (unlike /tmp, often tmpfs, which cannot hold swap), writable,
/// and periodically cleaned by systemd-tmpfiles should a run die hard.
const TEST_SWAP_DIR: &str = "/var/tmp";

/// A swap file memgang created and enabled. Idempotent `up`, cleaned up by `down`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapFile {
    pub path: PathBuf,
    /// Length of the file; the kernel uses all of it but the header page.
    pub size_bytes: u64,
}

/// Sequential bandwidth of a device, see [`measure_bandwidth`], and its
/// random read rate, see [`measure_device`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bandwidth {
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
    /// Bytes written and then read back for the measurement.
    pub sample_bytes: u64,
    /// Random 4 KiB `O_DIRECT` reads per second, one at a time (queue
    /// depth 1, as a process waiting on page faults reads); `None` unless
    /// [`measure_device`] was asked for it.
    pub random_read_iops: Option<f64>,
    /// The same reads, [`QUEUE_DEPTH`] in flight at once (one thread
    /// each): the rate at which the device serves the reads that swap
    /// readahead issues together, and those of several faulting tasks.
    pub queue_read_iops: Option<f64>,
}

/// Reads in flight for [`Bandwidth::queue_read_iops`]: the kernel's swap
/// readahead window, 2^`vm.page-cluster` pages (3 by default), issued
/// together by one fault.
pub const QUEUE_DEPTH: usize = 8;

/// One line of /proc/swaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapArea {
    /// As the kernel prints it (resolved, unescaped). A file deleted while
    /// active keeps its entry with a trailing " (deleted)".
    pub path: PathBuf,
    /// Usable size: the file or partition minus its header page.
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub priority: i32,
}

/// Create `path` of `size` bytes (rounded down to whole pages) with no holes,
/// mode 0600, write a swap header and enable it with `swapon(2)`.
///
/// Idempotent: if `path` already is an active swap of that size this returns
/// Ok. An active swap of another size is an error (run `memgang testbed down`
/// first). An inactive leftover swap file made by memgang is recreated; any
/// other existing file is left alone and reported.
pub fn up(path: &Path, size: u64) -> Result<SwapFile> {
    require_root("creating swap file", path)?;
    let page = page_size();
    let size = size / page * page;
    if size < MIN_SWAP_PAGES * page {
        return Err(Error::Unsupported(format!(
            "creating swap file {}: {} is too small, a swap area needs at least {} ({} pages)",
            path.display(),
            fmt_bytes(size),
            fmt_bytes(MIN_SWAP_PAGES * page),
            MIN_SWAP_PAGES
        )));
    }
    if (size / page - 1) > u64::from(u32::MAX) {
        return Err(Error::Unsupported(format!(
            "creating swap file {}: {} exceeds the largest swap area the header can describe",
            path.display(),
            fmt_bytes(size)
        )));
    }

    if let Some(area) = find_active(path)? {
        let len = fs::metadata(path)
            .map_err(|e| Error::io("inspecting active swap file", path, e))?
            .len();
        if len == size {
            tracing::info!(
                path = %path.display(),
                size = %fmt_bytes(size),
                used = %fmt_bytes(area.used_bytes),
                "swap file already active with the requested size, nothing to do"
            );
            return Ok(SwapFile {
                path: path.to_path_buf(),
                size_bytes: size,
            });
        }
        return Err(Error::Unsupported(format!(
            "creating swap file {}: it is already an active swap of {} but {} was requested; \
             run `memgang testbed down` first (swaps it off and removes it), then `up` again",
            path.display(),
            fmt_bytes(len),
            fmt_bytes(size)
        )));
    }

    match fs::symlink_metadata(path) {
        Ok(_) => {
            if is_memgang_swap(path)? {
                // Left over from an earlier run (e.g. swap is not re-enabled
                // after a reboot). Recreate rather than reuse so the no-holes
                // and size guarantees hold.
                tracing::info!(path = %path.display(), "removing inactive memgang swap file left over from an earlier run");
                fs::remove_file(path)
                    .map_err(|e| Error::io("removing stale swap file", path, e))?;
            } else {
                return Err(Error::Unsupported(format!(
                    "creating swap file {}: the path exists and is not a swap file made by memgang \
                     (no '{SWAP_LABEL}' swap label); refusing to overwrite it. Remove it yourself \
                     or choose another path",
                    path.display()
                )));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("inspecting swap file path", path, e)),
    }

    let dir = parent_dir(path);
    fs::create_dir_all(dir).map_err(|e| Error::io("creating directory for swap file", dir, e))?;
    check_free_space("creating swap file", path, dir, size)?;

    let mut guard = RemoveOnDrop::new(path);
    create_swap_file(path, size, page, true)?;
    match swapon(path) {
        Ok(()) => {}
        // Some filesystems accept fallocate but not unwritten extents in a
        // swap file; real zeros satisfy every filesystem that supports swap.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            tracing::info!(path = %path.display(), "swapon refused the preallocated file, retrying with a zero-filled one");
            fs::remove_file(path).map_err(|e| Error::io("removing refused swap file", path, e))?;
            create_swap_file(path, size, page, false)?;
            swapon(path).map_err(|e| Error::io("enabling swap on", path, swapon_hint(e)))?;
        }
        Err(e) => return Err(Error::io("enabling swap on", path, swapon_hint(e))),
    }
    guard.disarm();
    tracing::info!(path = %path.display(), size = %fmt_bytes(size), "swap file created and enabled");
    Ok(SwapFile {
        path: path.to_path_buf(),
        size_bytes: size,
    })
}

/// `swapoff(2)` `path` if it is active and remove the file. A missing file is
/// Ok (idempotent). Refuses files without memgang's swap label. swapoff has to
/// read every swapped page back into RAM, so it can take long.
pub fn down(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            tracing::info!(path = %path.display(), "swap file does not exist, nothing to do");
            return Ok(());
        }
        Err(e) => return Err(Error::io("inspecting swap file", path, e)),
    }
    require_root("removing swap file", path)?;
    if !is_memgang_swap(path)? {
        return Err(Error::Unsupported(format!(
            "removing swap file {}: it was not created by memgang (no '{SWAP_LABEL}' swap label); \
             refusing to swap it off or delete it. Use swapoff(8) and rm yourself if it must go",
            path.display()
        )));
    }
    if find_active(path)?.is_some() {
        tracing::info!(path = %path.display(), "swapping off (reads swapped pages back into RAM, may take a while)");
        match swapoff(path) {
            Ok(()) => {}
            // Someone else swapped it off between our check and now.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(Error::io("disabling swap on", path, swapoff_hint(e))),
        }
    }
    fs::remove_file(path).map_err(|e| Error::io("removing swap file", path, e))?;
    tracing::info!(path = %path.display(), "swap file disabled and removed");
    Ok(())
}

/// Active swap areas, from /proc/swaps.
pub fn active() -> Result<Vec<SwapArea>> {
    let text = match fs::read_to_string(PROC_SWAPS) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::Unsupported(format!(
                "reading {PROC_SWAPS}: it does not exist; the kernel is built without swap \
                 support (CONFIG_SWAP) or /proc is not mounted"
            )))
        }
        Err(e) => return Err(Error::io("reading active swap areas from", PROC_SWAPS, e)),
    };
    parse_proc_swaps(&text)
}

/// Parse the text of /proc/swaps (procfs 0.18 has no reader for it): a
/// header line, then `Filename Type Size Used Priority` with sizes in KiB
/// and the file name octal-escaped (`\040` for a space).
pub fn parse_proc_swaps(text: &str) -> Result<Vec<SwapArea>> {
    let bad = |line: &str, reason: String| Error::Parse {
        path: PathBuf::from(PROC_SWAPS),
        content: line.to_string(),
        reason,
    };
    let mut areas = Vec::new();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    match lines.next() {
        None => return Ok(areas),
        Some(h) if h.starts_with("Filename") => {}
        Some(h) => {
            return Err(bad(
                h,
                "expected the header line starting with 'Filename'".into(),
            ))
        }
    }
    for line in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 5 {
            return Err(bad(line, format!("expected 5 fields, found {}", f.len())));
        }
        let kib = |s: &str, what: &str| {
            s.parse::<u64>()
                .map(|k| k * 1024)
                .map_err(|e| bad(line, format!("{what} {s:?}: {e}")))
        };
        areas.push(SwapArea {
            path: PathBuf::from(unescape_octal(f[0])),
            size_bytes: kib(f[2], "size")?,
            used_bytes: kib(f[3], "used")?,
            priority: f[4]
                .parse()
                .map_err(|e| bad(line, format!("priority {:?}: {e}", f[4])))?,
        });
    }
    Ok(areas)
}

/// Sequential read and write bandwidth of the device holding `dir`: writes
/// `bytes` (rounded up to 1 MiB) to a temporary file with `O_DIRECT` in 1 MiB
/// aligned chunks, fsyncs, reads it back with `O_DIRECT`, removes the file
/// (also on error). This is the best the swap device can do; the paging cost
/// model and the benchmarks compare switch times against it.
pub fn measure_bandwidth(dir: &Path, bytes: u64) -> Result<Bandwidth> {
    measure_device(dir, bytes, Duration::ZERO)
}

/// [`measure_bandwidth`], then, for `random_for` (if not zero), random 4 KiB
/// `O_DIRECT` reads over the same file, one at a time: the rate of demand
/// page faults, which read single pages and wait for each; then as long
/// again with [`QUEUE_DEPTH`] reads in flight.
pub fn measure_device(dir: &Path, bytes: u64, random_for: Duration) -> Result<Bandwidth> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let chunk = IO_CHUNK as u64;
    let chunks = bytes.div_ceil(chunk).max(1);
    let bytes = chunks * chunk;
    let path = dir.join(format!(
        ".memgang-bandwidth-{}-{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    check_free_space("measuring bandwidth with", &path, dir, bytes)?;

    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return Err(Error::Unsupported(format!(
                "measuring bandwidth in {}: the filesystem does not support O_DIRECT (tmpfs?), so \
                 it cannot hold swap either; measure the directory that holds the swap file",
                dir.display()
            )))
        }
        Err(e) => return Err(Error::io("creating bandwidth probe file", &path, e)),
    };
    let mut guard = RemoveOnDrop::new(&path);
    // Allocate up front so the timed writes measure the device, not block
    // allocation, as swap writes into preallocated blocks. Best effort.
    let _ = fallocate(&file, bytes);

    // O_DIRECT needs buffers aligned to the logical block size, which is at
    // most the page size. Over-allocate a Vec and use an aligned window.
    let (mut backing, off) = aligned(IO_CHUNK);
    let buf = &mut backing[off..off + IO_CHUNK];
    // Incompressible content: virtual disks and SSDs may shortcut zeros.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
    for w in buf.chunks_exact_mut(8) {
        w.copy_from_slice(&xorshift(&mut x).to_ne_bytes());
    }

    let t = Instant::now();
    for i in 0..chunks {
        file.write_all_at(buf, i * chunk)
            .map_err(|e| Error::io("writing bandwidth probe file", &path, e))?;
    }
    file.sync_all()
        .map_err(|e| Error::io("syncing bandwidth probe file", &path, e))?;
    let write_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    for i in 0..chunks {
        file.read_exact_at(buf, i * chunk)
            .map_err(|e| Error::io("reading bandwidth probe file", &path, e))?;
    }
    let read_s = t.elapsed().as_secs_f64();

    let (random_read_iops, queue_read_iops) = if random_for.is_zero() {
        (None, None)
    } else {
        (
            Some(random_reads(&file, &path, bytes, random_for, x, 1)?),
            Some(random_reads(
                &file,
                &path,
                bytes,
                random_for,
                x,
                QUEUE_DEPTH,
            )?),
        )
    };

    drop(file);
    // Remove explicitly to report failures; the guard covers early returns.
    guard.disarm();
    fs::remove_file(&path).map_err(|e| Error::io("removing bandwidth probe file", &path, e))?;
    let rate = |s: f64| bytes as f64 / s.max(1e-9);
    Ok(Bandwidth {
        read_bytes_per_s: rate(read_s),
        write_bytes_per_s: rate(write_s),
        sample_bytes: bytes,
        random_read_iops,
        queue_read_iops,
    })
}

/// A zeroed buffer and the offset in it of `len` bytes aligned for
/// `O_DIRECT` (to the logical block size, at most the page size).
fn aligned(len: usize) -> (Vec<u8>, usize) {
    let align = page_size() as usize;
    let backing = vec![0u8; len + align];
    let off = backing.as_ptr().align_offset(align);
    (backing, off)
}

/// The next number of Marsaglia's xorshift64: incompressible bytes and
/// probe offsets, cheap, and the same on every run for a seed.
pub(crate) fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Random 4 KiB `O_DIRECT` reads of `file` for `span`, `depth` threads
/// each with one in flight (1: as a task waiting on its page faults reads;
/// [`QUEUE_DEPTH`]: as swap readahead does): reads per second of them all.
fn random_reads(
    file: &File,
    path: &Path,
    bytes: u64,
    span: Duration,
    seed: u64,
    depth: usize,
) -> Result<f64> {
    let pages = bytes / RANDOM_IO as u64;
    let t = Instant::now();
    let counts = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..depth as u64)
            .map(|i| {
                scope.spawn(move || -> Result<u64> {
                    let (mut backing, off) = aligned(RANDOM_IO);
                    let page = &mut backing[off..off + RANDOM_IO];
                    // Each thread its own sequence: no two read in step.
                    let mut x = seed ^ (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let mut reads = 0u64;
                    while t.elapsed() < span {
                        let at = (xorshift(&mut x) % pages) * RANDOM_IO as u64;
                        file.read_exact_at(page, at)
                            .map_err(|e| Error::io("reading bandwidth probe file", path, e))?;
                        reads += 1;
                    }
                    Ok(reads)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a probe thread panicked"))
            .collect::<Result<Vec<u64>>>()
    })?;
    Ok(counts.iter().sum::<u64>() as f64 / t.elapsed().as_secs_f64())
}

/// A swap file for tests and benchmarks: [`up`] in `new`, [`down`] in `Drop`
/// (also while unwinding from a panic). Lives in /var/tmp as
/// `memgang-test-<pid>-<n>.swap`.
#[derive(Debug)]
pub struct TestSwap {
    file: SwapFile,
}

impl TestSwap {
    pub fn new(size: u64) -> Result<Self> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let path = Path::new(TEST_SWAP_DIR).join(format!(
            "memgang-test-{}-{}.swap",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        Ok(TestSwap {
            file: up(&path, size)?,
        })
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    pub fn size_bytes(&self) -> u64 {
        self.file.size_bytes
    }
}

impl Drop for TestSwap {
    fn drop(&mut self) {
        if let Err(e) = down(&self.file.path) {
            // Drop cannot fail; say it loudly so the leak gets cleaned up.
            tracing::error!("test swap not cleaned up: {e}");
            eprintln!(
                "memgang: test swap not cleaned up: {e}; run `swapoff {0}; rm {0}`",
                self.file.path.display()
            );
        }
    }
}

// ---------------------------------------------------------------------------

use crate::sysfs::page_size;

fn require_root(action: &str, path: &Path) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(Error::Permission(format!(
            "{action} {} needs root: swapon(2) requires CAP_SYS_ADMIN; run as root or ask your \
             admin to add swap",
            path.display()
        )))
    }
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The active swap area backed by `path`, matched on the resolved path since
/// that is what the kernel prints.
fn find_active(path: &Path) -> Result<Option<SwapArea>> {
    let canon = match fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("resolving swap file path", path, e)),
    };
    Ok(active()?.into_iter().find(|a| a.path == canon))
}

/// Whether `path` carries a swap signature and memgang's label.
fn is_memgang_swap(path: &Path) -> Result<bool> {
    let page = page_size() as usize;
    let file = File::open(path).map_err(|e| Error::io("reading swap header of", path, e))?;
    let mut hdr = vec![0u8; page];
    let mut got = 0;
    while got < page {
        match file.read_at(&mut hdr[got..], got as u64) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("reading swap header of", path, e)),
        }
    }
    let label = &hdr[HDR_LABEL..HDR_LABEL + HDR_LABEL_LEN];
    let len = label.iter().position(|&b| b == 0).unwrap_or(HDR_LABEL_LEN);
    Ok(&hdr[page - SWAP_MAGIC.len()..] == SWAP_MAGIC && &label[..len] == SWAP_LABEL.as_bytes())
}

fn check_free_space(action: &'static str, path: &Path, dir: &Path, size: u64) -> Result<()> {
    let st = nix::sys::statvfs::statvfs(dir)
        .map_err(|e| Error::io("checking free space for", dir, io::Error::from(e)))?;
    let free = st.blocks_available() as u64 * st.fragment_size() as u64;
    if size.saturating_add(FREE_SPACE_HEADROOM) > free {
        return Err(Error::io(
            action,
            path,
            io::Error::other(format!(
                "needs {} plus {} headroom but only {} is free on the filesystem of {}; free \
                     some space, use a smaller size or another path",
                fmt_bytes(size),
                fmt_bytes(FREE_SPACE_HEADROOM),
                fmt_bytes(free),
                dir.display()
            )),
        ));
    }
    Ok(())
}

fn fallocate(file: &File, len: u64) -> io::Result<()> {
    // SAFETY: valid open fd; fallocate only touches the file.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Create the swap file (must not exist), allocate every block, write the
/// header and sync, so that swapon finds a complete, hole-free file.
fn create_swap_file(path: &Path, size: u64, page: u64, try_fallocate: bool) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("creating swap file", path, e))?;
    // The umask may have narrowed the mode; swap must be exactly 0600 (other
    // users could read swapped-out memory otherwise, and swapon warns).
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io("setting mode 0600 on swap file", path, e))?;

    let allocated = if try_fallocate {
        match fallocate(&file, size) {
            Ok(()) => true,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)
                ) =>
            {
                false
            }
            Err(e) => return Err(Error::io("allocating swap file", path, e)),
        }
    } else {
        false
    };
    if !allocated {
        // Writing real zeros is the portable way to a file without holes.
        let zeros = vec![0u8; IO_CHUNK];
        let mut off = 0;
        while off < size {
            let n = (size - off).min(IO_CHUNK as u64) as usize;
            file.write_all_at(&zeros[..n], off)
                .map_err(|e| Error::io("zero-filling swap file", path, e))?;
            off += n as u64;
        }
    }
    file.write_all_at(&swap_header(page as usize, size / page), 0)
        .map_err(|e| Error::io("writing swap header to", path, e))?;
    file.sync_all()
        .map_err(|e| Error::io("syncing swap file", path, e))
}

/// Page 0 of a version-1 swap area, what mkswap writes.
fn swap_header(page: usize, pages: u64) -> Vec<u8> {
    let mut h = vec![0u8; page];
    let put = |h: &mut [u8], at: usize, v: u32| h[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    put(&mut h, HDR_VERSION, 1);
    put(&mut h, HDR_LAST_PAGE, (pages - 1) as u32);
    put(&mut h, HDR_NR_BADPAGES, 0);
    // A random (version 4) UUID so tools like blkid can tell areas apart;
    // all zeros is acceptable to the kernel if getrandom fails.
    let mut uuid = [0u8; 16];
    // SAFETY: writes at most 16 bytes into the 16-byte buffer.
    let n = unsafe { libc::getrandom(uuid.as_mut_ptr().cast(), uuid.len(), 0) };
    if n == 16 {
        uuid[6] = (uuid[6] & 0x0f) | 0x40;
        uuid[8] = (uuid[8] & 0x3f) | 0x80;
    } else {
        uuid = [0; 16];
    }
    h[HDR_UUID..HDR_UUID + 16].copy_from_slice(&uuid);
    let label = SWAP_LABEL.as_bytes();
    h[HDR_LABEL..HDR_LABEL + label.len()].copy_from_slice(label);
    h[page - SWAP_MAGIC.len()..].copy_from_slice(SWAP_MAGIC);
    h
}

fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn swapon(path: &Path) -> io::Result<()> {
    let c = cpath(path)?;
    // SAFETY: c is a valid NUL-terminated path. Flags 0: default priority.
    if unsafe { libc::swapon(c.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn swapoff(path: &Path) -> io::Result<()> {
    let c = cpath(path)?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::swapoff(c.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn with_hint(e: io::Error, hint: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{e}: {hint}"))
}

fn swapon_hint(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EINVAL) => with_hint(
            e,
            "this filesystem cannot hold a swap file (tmpfs, NFS, overlayfs, or btrfs without \
             nodatacow do not work); choose a path on ext4 or xfs",
        ),
        Some(libc::EPERM) => with_hint(
            e,
            "swapon needs CAP_SYS_ADMIN and is refused inside most containers and under kernel \
             lockdown",
        ),
        Some(libc::EBUSY) => with_hint(e, "the file is already in use as swap or otherwise"),
        _ => e,
    }
}

fn swapoff_hint(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ENOMEM) => with_hint(
            e,
            "not enough free RAM to take back the swapped-out pages; stop or shrink jobs and \
             retry",
        ),
        Some(libc::EPERM) => with_hint(e, "swapoff needs CAP_SYS_ADMIN"),
        _ => e,
    }
}

fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Removes a file we created when an operation fails half way.
struct RemoveOnDrop {
    path: PathBuf,
    armed: bool,
}

impl RemoveOnDrop {
    fn new(path: &Path) -> Self {
        RemoveOnDrop {
            path: path.to_path_buf(),
            armed: true,
        }
    }
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let _ = fs::remove_file(&self.path);
        }
    }
}
