//! The C ABI: what `include/memadapt.h` declares, for application
//! developers of scientific codes in C, C++ and Fortran (through
//! `iso_c_binding`). The header is the user documentation; this file says
//! how the promises made there are kept.
//!
//! Conventions, the same for every function:
//!
//! - The return value is a status: [`MEMADAPT_OK`] (0) or a negative
//!   `MEMADAPT_E_*` code. Results go through out-pointers, which are set
//!   to NULL / 0 first, so a failed call never leaves them undefined.
//! - On failure, [`memadapt_last_error`] returns a message for this thread
//!   naming the function, the file and panel concerned, and what to do.
//!   Thread-local because C callers of different threads (OpenMP, MPI
//!   with threads) must not see each other's messages.
//! - No panic crosses the boundary (unwinding into C is undefined
//!   behaviour): every body runs under `catch_unwind` and a panic becomes
//!   [`MEMADAPT_E_INTERNAL`]. A store whose call panicked is left
//!   "poisoned": its state may be half-updated, so later calls on it fail
//!   with the same code until it is closed.
//! - NULL pointers are reported as [`MEMADAPT_E_NULL`] naming the
//!   argument; `memadapt_close(NULL)` and `memadapt_file_abort(NULL)` do
//!   nothing, as `free(NULL)`, so that cleanup paths need no test.
//!
//! Handles are boxed Rust values behind opaque C struct pointers. What C
//! cannot be protected from: a dangling or foreign handle, a handle used
//! after close, two threads using one handle at once, and a panel pointer
//! used after the call that unmapped it. The header documents each.

use crate::error::Error;
use crate::file::{ElementType, Header, Writer};
use crate::store::{Mode, PanelStore};
use crate::Policy;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString, OsStr};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr;

// Status codes: keep in step with `enum memadapt_status` in the header
// (tests/capi.rs compiles the header and compares).
pub const MEMADAPT_OK: c_int = 0;
/// A pointer argument was NULL.
pub const MEMADAPT_E_NULL: c_int = -1;
/// An argument out of its domain: unknown flags or element type, a panel
/// of the wrong length, an unpin without a pin, ...
pub const MEMADAPT_E_INVALID: c_int = -2;
pub const MEMADAPT_E_NOT_FOUND: c_int = -3;
pub const MEMADAPT_E_IO: c_int = -4;
pub const MEMADAPT_E_DISK_FULL: c_int = -5;
/// Not a memadapt data file, another format version, a damaged header,
/// another byte order or page size.
pub const MEMADAPT_E_FORMAT: c_int = -6;
pub const MEMADAPT_E_TRUNCATED: c_int = -7;
pub const MEMADAPT_E_INCOMPLETE: c_int = -8;
pub const MEMADAPT_E_RANGE: c_int = -9;
pub const MEMADAPT_E_READ_ONLY: c_int = -10;
/// `mmap` or `munmap` failed (address space or map count exhausted).
pub const MEMADAPT_E_MAP: c_int = -11;
pub const MEMADAPT_E_WRITE_BACK: c_int = -12;
pub const MEMADAPT_E_RSS: c_int = -13;
/// A bug in memadapt (a caught panic), or a store poisoned by one.
pub const MEMADAPT_E_INTERNAL: c_int = -14;

// `memadapt_open` flags: the mode in bit 0, the policy in bits 1-2,
// RSS-only in bit 3.
pub const MEMADAPT_READ_ONLY: c_uint = 0;
pub const MEMADAPT_READ_WRITE: c_uint = 1;
pub const MEMADAPT_POLICY_MRU: c_uint = 0;
pub const MEMADAPT_POLICY_LRU: c_uint = 1 << 1;
pub const MEMADAPT_POLICY_PRIORITY: c_uint = 2 << 1;
pub const MEMADAPT_RSS_ONLY: c_uint = 1 << 3;
const POLICY_MASK: c_uint = 3 << 1;
const KNOWN_FLAGS: c_uint = MEMADAPT_READ_WRITE | POLICY_MASK | MEMADAPT_RSS_ONLY;

/// An open panel store (`memadapt_store` in C).
pub struct MemadaptStore {
    store: PanelStore,
    /// Set while a call runs and cleared when it returns: still set after
    /// a caught panic, which may have left the store half-updated.
    poisoned: bool,
}

/// A data file being written (`memadapt_writer` in C).
pub struct MemadaptWriter {
    writer: Writer,
}

/// Counters and current state of a store (`struct memadapt_stats` in C). All
/// fields 64-bit, so the layout is the same on every platform and
/// Fortran can mirror it with `integer(c_int64_t)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemadaptStats {
    pub accesses: u64,
    pub maps: u64,
    pub unmaps: u64,
    pub write_backs: u64,
    pub shortages: u64,
    pub panels_shed: u64,
    pub probes: u64,
    pub panels_in: u64,
    pub mapped: u64,
    pub pinned: u64,
    pub desired_rss: u64,
    pub rebases: u64,
}

/// What a store holds (`struct memadapt_info` in C).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemadaptInfo {
    pub panels: u64,
    pub panel_bytes: u64,
    /// What a mapped panel adds to RSS: its size rounded up to pages.
    pub resident_panel_bytes: u64,
    /// A `MEMADAPT_BYTES` .. `MEMADAPT_F64` element type.
    pub element: u32,
    /// The flags the store was opened with.
    pub flags: u32,
}

/// Why a call failed: a status code and the message for
/// `memadapt_last_error`, without the function name, which `call` adds.
struct Failure {
    code: c_int,
    message: String,
}

impl Failure {
    fn new(code: c_int, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        // Exhaustive on purpose: a new error variant must get a code.
        let code = match &e {
            Error::NotFound { .. } => MEMADAPT_E_NOT_FOUND,
            Error::Io { .. } => MEMADAPT_E_IO,
            Error::DiskFull { .. } => MEMADAPT_E_DISK_FULL,
            Error::NotDataFile { .. }
            | Error::UnsupportedVersion { .. }
            | Error::Corrupt { .. }
            | Error::ByteOrder { .. }
            | Error::Alignment { .. } => MEMADAPT_E_FORMAT,
            Error::Truncated { .. } => MEMADAPT_E_TRUNCATED,
            Error::Incomplete { .. } => MEMADAPT_E_INCOMPLETE,
            Error::NoPanels { .. }
            | Error::ZeroPanelSize { .. }
            | Error::BadLayout { .. }
            | Error::PanelLength { .. }
            | Error::FixedPanels { .. }
            | Error::ElementMismatch { .. }
            | Error::ElementSize { .. }
            | Error::NotPinned { .. }
            | Error::Adapter { .. } => MEMADAPT_E_INVALID,
            Error::PanelOutOfRange { .. } => MEMADAPT_E_RANGE,
            Error::ReadOnly { .. } => MEMADAPT_E_READ_ONLY,
            Error::Mmap { .. } => MEMADAPT_E_MAP,
            Error::WriteBack { .. } => MEMADAPT_E_WRITE_BACK,
            Error::Rss { .. } => MEMADAPT_E_RSS,
        };
        // The Rust messages name Rust functions as the remedy where there
        // is one; a C programmer needs the C name.
        let message = match &e {
            Error::NotFound { path } => format!(
                "data file {} does not exist: check the path, or create the file first \
                 (memadapt_file_create, memadapt_file_write_panel, memadapt_file_finish)",
                path.display()
            ),
            Error::ReadOnly { path, panel } => format!(
                "{} is open read-only: panel {panel} cannot be written; open the store \
                 with MEMADAPT_READ_WRITE to change panels",
                path.display()
            ),
            _ => e.to_string(),
        };
        Failure { code, message }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(function: &str, message: &str) {
    let text = format!("{function}: {message}");
    // A path may hold a NUL only if it came from Rust; C strings cannot.
    let text = CString::new(text.replace('\0', "\\0")).expect("NULs replaced");
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// Runs one C entry point's body: a status code out, the message kept,
/// no panic through.
fn call(function: &str, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => MEMADAPT_OK,
        Ok(Err(failure)) => {
            set_last_error(function, &failure.message);
            failure.code
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            set_last_error(
                function,
                &format!(
                    "internal error, a bug in memadapt: {what}; the store (if any) can \
                     only be closed now; please report this message"
                ),
            );
            MEMADAPT_E_INTERNAL
        }
    }
}

/// Runs a body on an open store, refusing a poisoned one.
///
/// # Safety
/// `store` is NULL or a handle from `memadapt_open`, not closed, used by
/// no other thread meanwhile.
unsafe fn with_store(
    function: &str,
    store: *mut MemadaptStore,
    body: impl FnOnce(&mut PanelStore) -> Result<(), Failure>,
) -> c_int {
    call(function, || {
        // SAFETY: the caller's.
        let handle = unsafe { store.as_mut() }.ok_or_else(|| null_arg("store"))?;
        if handle.poisoned {
            return Err(Failure::new(
                MEMADAPT_E_INTERNAL,
                format!(
                    "the store of {} is unusable after an internal error in an earlier \
                     call; close it (memadapt_close) and open the file again",
                    handle.store.path().display()
                ),
            ));
        }
        // Stays set if the body panics (see `poisoned`).
        handle.poisoned = true;
        let result = body(&mut handle.store);
        handle.poisoned = false;
        result
    })
}

fn null_arg(name: &str) -> Failure {
    Failure::new(
        MEMADAPT_E_NULL,
        format!("argument `{name}` is NULL: pass a valid pointer"),
    )
}

/// An out-pointer, checked, its target cleared to `empty` first.
///
/// # Safety
/// `out` is NULL or valid for writes of a `T`.
unsafe fn out_arg<'a, T>(out: *mut T, name: &str, empty: T) -> Result<&'a mut T, Failure> {
    if out.is_null() {
        return Err(null_arg(name));
    }
    // SAFETY: the caller's; `write` because `*out` may be uninitialised.
    unsafe {
        out.write(empty);
        Ok(&mut *out)
    }
}

/// A path argument. Unix paths are bytes: no UTF-8 required.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
unsafe fn path_arg<'a>(path: *const c_char, name: &str) -> Result<&'a Path, Failure> {
    if path.is_null() {
        return Err(null_arg(name));
    }
    // SAFETY: the caller's.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    Ok(Path::new(OsStr::from_bytes(bytes)))
}

/// The options `flags` and `fixed_panels` ask for, or why they are wrong.
fn open_options(flags: c_uint, fixed_panels: usize) -> Result<crate::Options, Failure> {
    if flags & !KNOWN_FLAGS != 0 || flags & POLICY_MASK == POLICY_MASK {
        return Err(Failure::new(
            MEMADAPT_E_INVALID,
            format!(
                "unknown flags {flags:#x}: combine MEMADAPT_READ_ONLY or \
                 MEMADAPT_READ_WRITE with one of MEMADAPT_POLICY_MRU, \
                 MEMADAPT_POLICY_LRU, MEMADAPT_POLICY_PRIORITY, and optionally \
                 MEMADAPT_RSS_ONLY"
            ),
        ));
    }
    let mode = if flags & MEMADAPT_READ_WRITE != 0 {
        Mode::ReadWrite
    } else {
        Mode::ReadOnly
    };
    let policy = match flags & POLICY_MASK {
        MEMADAPT_POLICY_LRU => Policy::Lru,
        MEMADAPT_POLICY_PRIORITY => Policy::Priority,
        _ => Policy::Mru,
    };
    let mut options = PanelStore::options().mode(mode).policy(policy);
    if flags & MEMADAPT_RSS_ONLY != 0 {
        options = options.rss_only();
    }
    Ok(match fixed_panels {
        0 => options,
        n => options.fixed(n),
    })
}

fn flags_of(store: &PanelStore) -> u32 {
    let mode = match store.mode() {
        Mode::ReadOnly => MEMADAPT_READ_ONLY,
        Mode::ReadWrite => MEMADAPT_READ_WRITE,
    };
    let policy = match store.policy() {
        Policy::Mru => MEMADAPT_POLICY_MRU,
        Policy::Lru => MEMADAPT_POLICY_LRU,
        Policy::Priority => MEMADAPT_POLICY_PRIORITY,
    };
    let rss_only = if store.is_rss_only() {
        MEMADAPT_RSS_ONLY
    } else {
        0
    };
    mode | policy | rss_only
}

// ---- the entry points; the header documents each ----

/// The message of the last call on this thread that failed ("" if none).
/// Owned by the library; valid until the next failing call on this
/// thread.
#[no_mangle]
pub extern "C" fn memadapt_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// A static description of a status code, never NULL.
#[no_mangle]
pub extern "C" fn memadapt_strerror(status: c_int) -> *const c_char {
    let text: &'static CStr = match status {
        MEMADAPT_OK => c"success",
        MEMADAPT_E_NULL => c"a pointer argument is NULL",
        MEMADAPT_E_INVALID => c"invalid argument",
        MEMADAPT_E_NOT_FOUND => c"data file not found",
        MEMADAPT_E_IO => c"input/output error",
        MEMADAPT_E_DISK_FULL => c"disk full",
        MEMADAPT_E_FORMAT => c"not a usable memadapt data file",
        MEMADAPT_E_TRUNCATED => c"data file truncated",
        MEMADAPT_E_INCOMPLETE => c"data file not completely written",
        MEMADAPT_E_RANGE => c"panel number out of range",
        MEMADAPT_E_READ_ONLY => c"store is read-only",
        MEMADAPT_E_MAP => c"cannot map or unmap a panel",
        MEMADAPT_E_WRITE_BACK => c"writing a panel back failed",
        MEMADAPT_E_RSS => c"cannot measure the resident set size",
        MEMADAPT_E_INTERNAL => c"internal error in memadapt",
        _ => c"unknown memadapt status code",
    };
    text.as_ptr()
}

/// The library version, "MAJOR.MINOR.PATCH".
#[no_mangle]
pub extern "C" fn memadapt_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Creates (or replaces) a data file of `panels` panels of `panel_bytes`
/// bytes holding `element`s.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memadapt_file_create(
    path: *const c_char,
    panel_bytes: u64,
    panels: usize,
    element: c_int,
    out: *mut *mut MemadaptWriter,
) -> c_int {
    call("memadapt_file_create", || {
        // SAFETY: the caller's.
        let out = unsafe { out_arg(out, "out", ptr::null_mut())? };
        let path = unsafe { path_arg(path, "path")? };
        let element = u32::try_from(element)
            .ok()
            .and_then(ElementType::from_tag)
            .ok_or_else(|| {
                Failure::new(
                    MEMADAPT_E_INVALID,
                    format!(
                        "cannot create data file {}: unknown element type {element}; use \
                         MEMADAPT_BYTES .. MEMADAPT_F64",
                        path.display()
                    ),
                )
            })?;
        let header = Header::new(panels, panel_bytes).with_element(element);
        let writer = Writer::create(path, header)?;
        *out = Box::into_raw(Box::new(MemadaptWriter { writer }));
        Ok(())
    })
}

/// Writes panel `panel` from `bytes` bytes at `data` (exactly one panel).
///
/// # Safety
/// `writer` is NULL or a live writer handle; `data` is NULL or readable
/// for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn memadapt_file_write_panel(
    writer: *mut MemadaptWriter,
    panel: usize,
    data: *const c_void,
    bytes: usize,
) -> c_int {
    call("memadapt_file_write_panel", || {
        // SAFETY: the caller's.
        let handle = unsafe { writer.as_mut() }.ok_or_else(|| null_arg("writer"))?;
        if data.is_null() {
            return Err(null_arg("data"));
        }
        // SAFETY: the caller's.
        let data = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), bytes) };
        Ok(handle.writer.write_panel(panel, data)?)
    })
}

/// Makes the panels durable, marks the file complete and frees the
/// writer, whatever the outcome.
///
/// # Safety
/// `writer` is NULL or a live writer handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn memadapt_file_finish(writer: *mut MemadaptWriter) -> c_int {
    call("memadapt_file_finish", || {
        if writer.is_null() {
            return Err(null_arg("writer"));
        }
        // SAFETY: the caller's: a handle from Box::into_raw, given back.
        let handle = unsafe { Box::from_raw(writer) };
        handle.writer.finish()?;
        Ok(())
    })
}

/// Frees a writer without marking its file complete (memadapt_open then
/// refuses the file as incomplete). NULL: nothing.
///
/// # Safety
/// `writer` is NULL or a live writer handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn memadapt_file_abort(writer: *mut MemadaptWriter) -> c_int {
    call("memadapt_file_abort", || {
        if !writer.is_null() {
            // SAFETY: the caller's.
            drop(unsafe { Box::from_raw(writer) });
        }
        Ok(())
    })
}

/// Opens a data file as a panel store.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memadapt_open(
    path: *const c_char,
    flags: c_uint,
    fixed_panels: usize,
    out: *mut *mut MemadaptStore,
) -> c_int {
    call("memadapt_open", || {
        // SAFETY: the caller's.
        let out = unsafe { out_arg(out, "out", ptr::null_mut())? };
        let path = unsafe { path_arg(path, "path")? };
        let options = open_options(flags, fixed_panels).map_err(|f| Failure {
            message: format!("cannot open {}: {}", path.display(), f.message),
            ..f
        })?;
        let store = options.open(path)?;
        *out = Box::into_raw(Box::new(MemadaptStore {
            store,
            poisoned: false,
        }));
        Ok(())
    })
}

/// Writes changed panels back, unmaps everything and frees the store,
/// whatever the outcome. NULL: nothing.
///
/// # Safety
/// `store` is NULL or a live store handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn memadapt_close(store: *mut MemadaptStore) -> c_int {
    call("memadapt_close", || {
        if store.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's: a handle from Box::into_raw, given back.
        let handle = unsafe { Box::from_raw(store) };
        handle.store.close()?;
        Ok(())
    })
}

/// One access for the C caller: the panel's address and length.
fn access(s: &mut PanelStore, panel: usize, write: bool) -> Result<(*mut c_void, usize), Failure> {
    Ok(if write {
        let p = s.panel_mut(panel)?;
        (p.as_mut_ptr().cast(), p.len())
    } else {
        let p = s.panel(panel)?;
        // Handed out as `const void *`: C code gets the address only.
        (p.as_ptr().cast_mut().cast(), p.len())
    })
}

/// The six panel calls: by number or next in the sweep, to read or to
/// write, and by number pinned.
///
/// # Safety
/// `store` is NULL or a live store handle; `index` (if given), `data`
/// and `len` are NULL or valid for writes.
unsafe fn panel_call(
    function: &str,
    store: *mut MemadaptStore,
    which: Which,
    data: *mut *mut c_void,
    len: *mut usize,
    write: bool,
    pin: bool,
) -> c_int {
    // SAFETY: the caller's, passed on.
    unsafe {
        with_store(function, store, |s| {
            let data = out_arg(data, "data", ptr::null_mut())?;
            let len = out_arg(len, "len", 0)?;
            let panel = match which {
                Which::Panel(panel) => panel,
                Which::Next(index) => {
                    let index = out_arg(index, "index", 0)?;
                    *index = s.next_index();
                    *index
                }
            };
            (*data, *len) = access(s, panel, write)?;
            if pin {
                s.pin_accessed(panel);
            }
            Ok(())
        })
    }
}

#[derive(Clone, Copy)]
enum Which {
    Panel(usize),
    /// The next panel of the sweep, its number written here.
    Next(*mut usize),
}

/// Panel `panel` for reading: its address (page-aligned) and length in
/// bytes.
///
/// # Safety
/// `store` is NULL or a live store handle; `data` and `len` are NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn memadapt_panel(
    store: *mut MemadaptStore,
    panel: usize,
    data: *mut *const c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: the caller's; `*const` and `*mut` pointers have one layout.
    unsafe {
        panel_call(
            "memadapt_panel",
            store,
            Which::Panel(panel),
            data.cast(),
            len,
            false,
            false,
        )
    }
}

/// Panel `panel` for writing (read-write stores): it is written back
/// before it is unmapped and at flush and close.
///
/// # Safety
/// As [`memadapt_panel`].
#[no_mangle]
pub unsafe extern "C" fn memadapt_panel_mut(
    store: *mut MemadaptStore,
    panel: usize,
    data: *mut *mut c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        panel_call(
            "memadapt_panel_mut",
            store,
            Which::Panel(panel),
            data,
            len,
            true,
            false,
        )
    }
}

/// The next panel of a cyclic sweep (0, 1, …, P−1, 0, …) for reading,
/// its number in `*index`.
///
/// # Safety
/// As [`memadapt_panel`], and `index` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn memadapt_next_panel(
    store: *mut MemadaptStore,
    index: *mut usize,
    data: *mut *const c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        panel_call(
            "memadapt_next_panel",
            store,
            Which::Next(index),
            data.cast(),
            len,
            false,
            false,
        )
    }
}

/// [`memadapt_next_panel`] for writing.
///
/// # Safety
/// As [`memadapt_next_panel`].
#[no_mangle]
pub unsafe extern "C" fn memadapt_next_panel_mut(
    store: *mut MemadaptStore,
    index: *mut usize,
    data: *mut *mut c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        panel_call(
            "memadapt_next_panel_mut",
            store,
            Which::Next(index),
            data,
            len,
            true,
            false,
        )
    }
}

/// Maps `panel` if need be and keeps it mapped until unpinned.
///
/// # Safety
/// `store` is NULL or a live store handle.
#[no_mangle]
pub unsafe extern "C" fn memadapt_pin(store: *mut MemadaptStore, panel: usize) -> c_int {
    // SAFETY: the caller's.
    unsafe { with_store("memadapt_pin", store, |s| Ok(s.pin(panel)?)) }
}

/// Panel `panel` for reading, pinned, in one access: [`memadapt_panel`]
/// then [`memadapt_pin`] without the second access's RSS reading.
///
/// # Safety
/// As [`memadapt_panel`].
#[no_mangle]
pub unsafe extern "C" fn memadapt_pin_panel(
    store: *mut MemadaptStore,
    panel: usize,
    data: *mut *const c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        panel_call(
            "memadapt_pin_panel",
            store,
            Which::Panel(panel),
            data.cast(),
            len,
            false,
            true,
        )
    }
}

/// [`memadapt_pin_panel`] for writing (read-write stores).
///
/// # Safety
/// As [`memadapt_panel`].
#[no_mangle]
pub unsafe extern "C" fn memadapt_pin_panel_mut(
    store: *mut MemadaptStore,
    panel: usize,
    data: *mut *mut c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        panel_call(
            "memadapt_pin_panel_mut",
            store,
            Which::Panel(panel),
            data,
            len,
            true,
            true,
        )
    }
}

/// Releases one pin of `panel`.
///
/// # Safety
/// `store` is NULL or a live store handle.
#[no_mangle]
pub unsafe extern "C" fn memadapt_unpin(store: *mut MemadaptStore, panel: usize) -> c_int {
    // SAFETY: the caller's.
    unsafe { with_store("memadapt_unpin", store, |s| Ok(s.unpin(panel)?)) }
}

/// Sets `panel`'s priority for MEMADAPT_POLICY_PRIORITY: lower goes first.
///
/// # Safety
/// `store` is NULL or a live store handle.
#[no_mangle]
pub unsafe extern "C" fn memadapt_set_priority(
    store: *mut MemadaptStore,
    panel: usize,
    priority: u32,
) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        with_store("memadapt_set_priority", store, |s| {
            Ok(s.set_priority(panel, priority)?)
        })
    }
}

/// Tells the store the program's memory besides the panels changed.
///
/// # Safety
/// `store` is NULL or a live store handle.
#[no_mangle]
pub unsafe extern "C" fn memadapt_set_other_memory(store: *mut MemadaptStore, bytes: u64) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        with_store("memadapt_set_other_memory", store, |s| {
            Ok(s.set_other_memory(bytes)?)
        })
    }
}

/// Sets the RSS differences the adaptation ignores as noise.
///
/// # Safety
/// `store` is NULL or a live store handle.
#[no_mangle]
pub unsafe extern "C" fn memadapt_set_tolerance(store: *mut MemadaptStore, bytes: u64) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        with_store("memadapt_set_tolerance", store, |s| {
            s.set_tolerance(bytes);
            Ok(())
        })
    }
}

/// Writes every changed panel back, keeping the panels mapped.
///
/// # Safety
/// `store` is NULL or a live store handle.
#[no_mangle]
pub unsafe extern "C" fn memadapt_flush(store: *mut MemadaptStore) -> c_int {
    // SAFETY: the caller's.
    unsafe { with_store("memadapt_flush", store, |s| Ok(s.flush()?)) }
}

/// The store's counters and current state.
///
/// # Safety
/// `store` is NULL or a live store handle; `out` is NULL or valid for
/// writes of a `memadapt_stats`.
#[no_mangle]
pub unsafe extern "C" fn memadapt_stats(
    store: *mut MemadaptStore,
    out: *mut MemadaptStats,
) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        with_store("memadapt_stats", store, |s| {
            let out = out_arg(out, "out", MemadaptStats::default())?;
            let c = s.stats();
            *out = MemadaptStats {
                accesses: c.accesses,
                maps: c.maps,
                unmaps: c.unmaps,
                write_backs: c.write_backs,
                shortages: c.shortages,
                panels_shed: c.panels_shed,
                probes: c.probes,
                panels_in: s.panels_in() as u64,
                mapped: s.mapped_count() as u64,
                pinned: s.pinned_count() as u64,
                desired_rss: s.desired_rss(),
                rebases: c.rebases,
            };
            Ok(())
        })
    }
}

/// What the store holds: P, the panel size, the element type.
///
/// # Safety
/// `store` is NULL or a live store handle; `out` is NULL or valid for
/// writes of a `memadapt_info`.
#[no_mangle]
pub unsafe extern "C" fn memadapt_info(store: *mut MemadaptStore, out: *mut MemadaptInfo) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        with_store("memadapt_info", store, |s| {
            let out = out_arg(out, "out", MemadaptInfo::default())?;
            *out = MemadaptInfo {
                panels: s.panels() as u64,
                panel_bytes: s.panel_size(),
                resident_panel_bytes: s.resident_panel_size(),
                element: s.element().tag(),
                flags: flags_of(s),
            };
            Ok(())
        })
    }
}

/// Writes the store's timeline (one line per recorded access) as CSV to
/// the file `path`, replacing it.
///
/// # Safety
/// `store` is NULL or a live store handle; `path` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn memadapt_write_timeline_csv(
    store: *mut MemadaptStore,
    path: *const c_char,
) -> c_int {
    // SAFETY: the caller's.
    unsafe {
        with_store("memadapt_write_timeline_csv", store, |s| {
            let path = path_arg(path, "path")?;
            let file =
                File::create(path).map_err(|e| Error::io("create the timeline file", path, e))?;
            let mut out = BufWriter::new(file);
            s.timeline()
                .write_csv(&mut out)
                .and_then(|()| out.flush())
                .map_err(|e| Error::io("write the timeline to", path, e))?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        // SAFETY: the library's own NUL-terminated string.
        unsafe { CStr::from_ptr(memadapt_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_a_message() {
        let status = call("memadapt_test", || panic!("scripted panic {}", 42));
        assert_eq!(status, MEMADAPT_E_INTERNAL);
        let msg = last_error();
        assert!(
            msg.starts_with("memadapt_test: internal error, a bug in memadapt: scripted panic 42"),
            "{msg}"
        );
    }

    #[test]
    fn a_store_whose_call_panicked_is_poisoned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.panels");
        crate::file::from_slices(&path, &[&[1u8; 10][..]]).unwrap();
        let mut handle = MemadaptStore {
            store: PanelStore::open(&path).unwrap(),
            poisoned: false,
        };
        let store: *mut MemadaptStore = &mut handle;
        // SAFETY: a live handle, on this thread only.
        let status = unsafe { with_store("memadapt_test", store, |_| panic!("half-way")) };
        assert_eq!(status, MEMADAPT_E_INTERNAL);
        let status = unsafe { memadapt_flush(store) };
        assert_eq!(status, MEMADAPT_E_INTERNAL);
        let msg = last_error();
        assert!(msg.starts_with("memadapt_flush: the store of"), "{msg}");
        assert!(msg.contains("memadapt_close"), "{msg}");
    }

    #[test]
    fn flags_are_checked_and_read_back() {
        for bad in [POLICY_MASK, 1 << 4, u32::MAX] {
            let f = open_options(bad, 0).err().expect("refused");
            assert_eq!(f.code, MEMADAPT_E_INVALID);
            assert!(f.message.contains("MEMADAPT_POLICY_LRU"), "{}", f.message);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.panels");
        crate::file::from_slices(&path, &[&[1u8; 10][..], &[2u8; 10][..]]).unwrap();
        for flags in [
            MEMADAPT_READ_ONLY,
            MEMADAPT_READ_WRITE | MEMADAPT_POLICY_LRU,
            MEMADAPT_POLICY_PRIORITY,
            MEMADAPT_POLICY_LRU | MEMADAPT_RSS_ONLY,
        ] {
            let store = open_options(flags, 1).ok().unwrap().open(&path).unwrap();
            assert_eq!(flags_of(&store), flags);
            assert!(store.adapter().is_none(), "fixed");
        }
    }

    #[test]
    fn every_status_has_a_description() {
        for code in MEMADAPT_E_INTERNAL..=MEMADAPT_OK {
            // SAFETY: static NUL-terminated strings.
            let text = unsafe { CStr::from_ptr(memadapt_strerror(code)) };
            assert_ne!(text.to_bytes(), b"unknown memadapt status code", "{code}");
        }
        let text = unsafe { CStr::from_ptr(memadapt_strerror(1)) };
        assert_eq!(text.to_bytes(), b"unknown memadapt status code");
        let version = unsafe { CStr::from_ptr(memadapt_version()) };
        assert_eq!(version.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
