//! The data-set file: a small header, then P panels, each at an offset
//! that is a multiple of the page size.
//!
//! ```text
//! offset  bytes  field (integers little-endian)
//!      0      8  magic "MEMADAPT"
//!      8      4  format version (1)
//!     12      4  flags: bit 0 complete, bit 1 panels in big-endian byte order
//!     16      8  P, the number of panels
//!     24      8  panel size in bytes (any size > 0)
//!     32      8  align: panel alignment, a power of two, the page size by default
//!     40      4  element type tag (0 bytes, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32,
//!                6 u64, 7 i64, 8 f32, 9 f64)
//!     44      4  element size in bytes (redundant with the tag, for readers
//!                that do not know the tag)
//!     48     16  reserved, zero
//! panel i at  align + i * slot,  slot = panel size rounded up to align
//! file size   align + P * slot
//! ```
//!
//! Why the padding: panels are memory-mapped one by one, and `mmap(2)`
//! takes only file offsets that are a multiple of the page size. So each
//! panel starts at a multiple of `align` (the header's block comes first),
//! and a panel whose size is not a multiple of the page size is followed
//! by padding up to the next slot. The padding of a freshly created file
//! is a hole: it takes no disk space. Recording `align` in the file, rather
//! than assuming 4 KiB, lets a machine with larger pages tell that it
//! cannot map the file instead of mapping the wrong bytes.
//!
//! Panel data is stored raw, in the creating machine's byte order (the
//! store hands out the mapped bytes themselves, no conversion): the flags
//! record the order, and a machine of the other order refuses typed data.
//!
//! A file is created by a [`Writer`] ([`create`], [`Writer::create`]) or
//! in one call by [`from_slices`]; [`DataFile::open`] opens one and checks
//! it. The `complete` flag is set by [`Writer::finish`] alone, after the
//! panels are on disk, so a file whose writing was interrupted (a full
//! disk, a crash) is refused instead of read as zeros.

pub use crate::element::ElementType;
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// First bytes of every data file.
pub const MAGIC: [u8; 8] = *b"MEMADAPT";

/// The format version written and read. Readers refuse other versions
/// rather than guess at a layout they do not know.
pub const VERSION: u32 = 1;

/// Bytes of the header. The fields take 48; the rest is reserved (zero)
/// so that a later version can add fields without moving the panels,
/// which start at `align` anyway.
pub const HEADER_LEN: usize = 64;

/// Set by [`Writer::finish`] once every panel is on disk.
pub const FLAG_COMPLETE: u32 = 1 << 0;
/// Panel data is in big-endian byte order.
pub const FLAG_BIG_ENDIAN: u32 = 1 << 1;
/// Flags this version knows; a file with others set was written by a
/// newer format and is refused.
const KNOWN_FLAGS: u32 = FLAG_COMPLETE | FLAG_BIG_ENDIAN;

/// This machine's page size in bytes (`sysconf(_SC_PAGESIZE)`). Its own
/// copy of `memgang_linux::paging::page_size`: memadapt is a standalone
/// library (libmemadapt.so for C programs) that depends on no memgang
/// crate, and pulling memgang-linux (nix, serde...) into it for one call
/// would make every application that links it carry them.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    // POSIX requires the page size; 4096 is only a fallback for a libc
    // that does not answer, and every Linux architecture's pages are a
    // multiple of it.
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

mod sealed {
    pub trait Sealed {}
}

/// A primitive type panels can hold. Sealed: the store hands out mapped
/// file bytes as `&[T]`, which is only sound for types without padding
/// for which every bit pattern is a value, the primitives below.
pub trait Element: Copy + sealed::Sealed + 'static {
    const TYPE: ElementType;
}

macro_rules! element {
    ($($t:ty => $e:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TYPE: ElementType = ElementType::$e;
        }
    )*};
}
element!(u8 => Bytes, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
         u64 => U64, i64 => I64, f32 => F32, f64 => F64);

/// The bytes of a slice of elements.
pub(crate) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `Element` types are primitives without padding, so all
    // `size_of_val(data)` bytes are initialised, and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// The bytes of a mutable slice of elements.
fn as_bytes_mut<T: Element>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; and every bit pattern is a valid `T`, so
    // whatever is written through the bytes leaves valid elements.
    unsafe {
        std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(data))
    }
}

/// A data file's layout: what the header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// P.
    pub panels: usize,
    /// Bytes of one panel's data, without padding.
    pub panel_size: u64,
    /// Panel alignment in bytes (see the module documentation).
    pub align: u64,
    pub element: ElementType,
    /// `FLAG_*` bits.
    pub flags: u32,
}

impl Header {
    /// P untyped panels of `panel_size` bytes, aligned to this machine's
    /// page size, in its byte order.
    pub fn new(panels: usize, panel_size: u64) -> Header {
        let flags = if cfg!(target_endian = "big") {
            FLAG_BIG_ENDIAN
        } else {
            0
        };
        Header {
            panels,
            panel_size,
            align: page_size(),
            element: ElementType::Bytes,
            flags,
        }
    }

    /// The same, for panels of `T` (a whole number of them per panel).
    pub fn with_element(self, element: ElementType) -> Header {
        Header { element, ..self }
    }

    /// The same with panels aligned to `align` bytes, for a file to be
    /// mapped on machines with larger pages than this one (say 65536 for
    /// any Linux architecture).
    pub fn with_align(self, align: u64) -> Header {
        Header { align, ..self }
    }

    /// Bytes from one panel's start to the next's: the panel size rounded
    /// up to the alignment.
    pub fn slot_size(&self) -> u64 {
        self.panel_size.div_ceil(self.align) * self.align
    }

    /// Where panel `panel` starts in the file (`panel` may be P: the end).
    pub fn panel_offset(&self, panel: usize) -> u64 {
        self.align + panel as u64 * self.slot_size()
    }

    /// The size the file must have at least.
    pub fn file_size(&self) -> u64 {
        self.panel_offset(self.panels)
    }

    /// Whether [`Writer::finish`] completed.
    pub fn is_complete(&self) -> bool {
        self.flags & FLAG_COMPLETE != 0
    }

    /// Bytes of one element.
    pub fn element_size(&self) -> usize {
        self.element.size()
    }

    /// Why this layout is impossible, if it is. Checks everything
    /// [`file_size`](Header::file_size) and friends rely on not to
    /// overflow; P = 0 and a zero panel size are the callers' to report.
    fn layout_problem(&self) -> Option<String> {
        if !self.align.is_power_of_two() || self.align < HEADER_LEN as u64 {
            return Some(format!(
                "panel alignment must be a power of two of at least {HEADER_LEN} bytes, got {}",
                self.align
            ));
        }
        let size = self.element.size() as u64;
        if self.panel_size % size != 0 {
            return Some(format!(
                "panel size {} is not a whole number of {} elements ({size} bytes each)",
                self.panel_size, self.element
            ));
        }
        // The file size must fit an `off_t` for `mmap` and `pread`.
        let fits = self
            .panel_size
            .checked_next_multiple_of(self.align)
            .and_then(|slot| slot.checked_mul(self.panels as u64))
            .and_then(|panels| panels.checked_add(self.align))
            .is_some_and(|end| end <= i64::MAX as u64);
        if !fits {
            return Some(format!(
                "{} panels of {} bytes do not fit in a file (more than 2^63 bytes)",
                self.panels, self.panel_size
            ));
        }
        None
    }

    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&(self.panels as u64).to_le_bytes());
        b[24..32].copy_from_slice(&self.panel_size.to_le_bytes());
        b[32..40].copy_from_slice(&self.align.to_le_bytes());
        b[40..44].copy_from_slice(&self.element.tag().to_le_bytes());
        b[44..48].copy_from_slice(&(self.element.size() as u32).to_le_bytes());
        b
    }

    /// Reads and checks the header of `file` (at `path`, for messages),
    /// and that the file is as long as it says.
    fn read(file: &File, path: &Path) -> Result<Header> {
        let actual = file
            .metadata()
            .map_err(|e| Error::io("inspect data file", path, e))?
            .len();
        let mut b = [0u8; HEADER_LEN];
        let got = read_up_to(file, &mut b).map_err(|e| Error::io("read the header of", path, e))?;
        let not_data = |reason: String| Error::NotDataFile {
            path: path.to_owned(),
            reason,
        };
        if got < MAGIC.len() {
            return Err(not_data(format!(
                "it has {actual} bytes, fewer than the {HEADER_LEN}-byte header"
            )));
        }
        if b[0..8] != MAGIC {
            return Err(not_data(format!(
                "it does not start with {:?} (starts with {:?})",
                String::from_utf8_lossy(&MAGIC),
                String::from_utf8_lossy(&b[0..8])
            )));
        }
        if got < HEADER_LEN {
            return Err(Error::Truncated {
                path: path.to_owned(),
                expected: HEADER_LEN as u64,
                actual,
            });
        }
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_owned(),
                found: version,
                supported: VERSION,
            });
        }
        let corrupt = |reason: String| Error::Corrupt {
            path: path.to_owned(),
            reason,
        };
        let flags = u32_at(12);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(corrupt(format!(
                "unknown flags {:#x} (a newer memadapt's?)",
                flags & !KNOWN_FLAGS
            )));
        }
        let panels = u64_at(16);
        let panels = usize::try_from(panels)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| corrupt(format!("panel count {panels}")))?;
        let panel_size = u64_at(24);
        if panel_size == 0 {
            return Err(corrupt("panel size 0".into()));
        }
        let tag = u32_at(40);
        let element = ElementType::from_tag(tag)
            .ok_or_else(|| corrupt(format!("unknown element type tag {tag}")))?;
        let element_size = u32_at(44);
        if element_size as usize != element.size() {
            return Err(corrupt(format!(
                "element size {element_size} for {element} elements ({} bytes)",
                element.size()
            )));
        }
        let header = Header {
            panels,
            panel_size,
            align: u64_at(32),
            element,
            flags,
        };
        if let Some(problem) = header.layout_problem() {
            return Err(corrupt(problem));
        }
        // A longer file is accepted (copies padded by tools, say): only
        // a shorter one would make mapped panels fault (SIGBUS) past its end.
        if actual < header.file_size() {
            return Err(Error::Truncated {
                path: path.to_owned(),
                expected: header.file_size(),
                actual,
            });
        }
        if !header.is_complete() {
            return Err(Error::Incomplete {
                path: path.to_owned(),
            });
        }
        let big = flags & FLAG_BIG_ENDIAN != 0;
        if element != ElementType::Bytes && element.size() > 1 && big != cfg!(target_endian = "big")
        {
            let order = |big: bool| if big { "big" } else { "little" };
            return Err(Error::ByteOrder {
                path: path.to_owned(),
                element,
                file_order: order(big),
                native: order(!big),
            });
        }
        Ok(header)
    }
}

/// Reads from offset 0 until `buf` is full or the file ends; returns the
/// bytes read.
fn read_up_to(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Allocates disk blocks for every panel's bytes (not the padding), so
/// that a full disk is reported now, as an error, and not later: a write
/// through a shared mapping into a hole that finds the disk full kills the
/// process with SIGBUS. File systems without `fallocate` are left as they
/// are; their writes still report a full disk.
pub(crate) fn reserve_panels(file: &File, header: &Header, path: &Path) -> Result<()> {
    for panel in 0..header.panels {
        let offset = header.panel_offset(panel) as libc::off_t;
        let len = header.panel_size as libc::off_t;
        // SAFETY: fallocate only reads its integer arguments; the fd is
        // open for as long as `file` lives.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
                _ => Err(Error::io(
                    format!("reserve disk space for panel {panel} in"),
                    path,
                    e,
                )),
            };
        }
    }
    Ok(())
}

/// An open, checked data file: for the panel store, and for programs that
/// read panels into their own buffers (conventional out-of-core code).
#[derive(Debug)]
pub struct DataFile {
    file: File,
    path: PathBuf,
    header: Header,
    writable: bool,
}

impl DataFile {
    /// Opens the data file at `path`, read-only or for reading and
    /// writing, and checks its header and size.
    pub fn open(path: impl AsRef<Path>, writable: bool) -> Result<DataFile> {
        let path = path.as_ref();
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => Error::NotFound {
                    path: path.to_owned(),
                },
                _ => Error::io("open data file", path, e),
            })?;
        let header = Header::read(&file, path)?;
        Ok(DataFile {
            file,
            path: path.to_owned(),
            header,
            writable,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Reads panel `panel` into `buf` (exactly one panel of `T`), with
    /// `pread`: no mapping, nothing cached by the library.
    pub fn read_panel<T: Element>(&self, panel: usize, buf: &mut [T]) -> Result<()> {
        check_panel(
            &self.header,
            &self.path,
            panel,
            T::TYPE,
            std::mem::size_of_val(buf),
        )?;
        self.file
            .read_exact_at(as_bytes_mut(buf), self.header.panel_offset(panel))
            .map_err(|e| Error::io(format!("read panel {panel} of"), &self.path, e))
    }
}

/// Checks a panel number, an element type and a buffer length against a
/// file's header.
fn check_panel(
    header: &Header,
    path: &Path,
    panel: usize,
    requested: ElementType,
    bytes: usize,
) -> Result<()> {
    if panel >= header.panels {
        return Err(Error::PanelOutOfRange {
            path: path.to_owned(),
            panel,
            panels: header.panels,
        });
    }
    if !header.element.admits(requested) {
        return Err(Error::ElementMismatch {
            path: path.to_owned(),
            stored: header.element,
            requested,
        });
    }
    if bytes as u64 != header.panel_size {
        return Err(Error::PanelLength {
            path: path.to_owned(),
            panel,
            expected: header.panel_size,
            actual: bytes as u64,
        });
    }
    Ok(())
}

/// Creates a data file of `panels` untyped panels of `panel_size` bytes at
/// `path` (replacing any file there): write the panels, then
/// [`finish`](Writer::finish).
pub fn create(path: impl AsRef<Path>, panel_size: u64, panels: usize) -> Result<Writer> {
    Writer::create(path, Header::new(panels, panel_size))
}

/// Creates a data file at `path` holding `panels`, all of the same length,
/// in one call; records their element type. Returns the header written.
pub fn from_slices<T: Element>(path: impl AsRef<Path>, panels: &[&[T]]) -> Result<Header> {
    let path = path.as_ref();
    let panel_size = panels.first().map_or(0, |p| std::mem::size_of_val(*p)) as u64;
    let header = Header::new(panels.len(), panel_size).with_element(T::TYPE);
    let mut writer = Writer::create(path, header)?;
    for (i, data) in panels.iter().enumerate() {
        writer.write_panel(i, data)?;
    }
    writer.finish()
}

/// Writes a new data file panel by panel. Panels not written read as
/// zeros. Dropped without [`finish`](Writer::finish), it leaves a file
/// that [`DataFile::open`] refuses as incomplete.
#[derive(Debug)]
pub struct Writer {
    file: File,
    path: PathBuf,
    header: Header,
}

impl Writer {
    /// Creates (or truncates) the file at `path` for the layout `header`,
    /// and reserves disk space for its panels, so that a full disk is
    /// reported here rather than half-way through the writing.
    pub fn create(path: impl AsRef<Path>, header: Header) -> Result<Writer> {
        let path = path.as_ref();
        if header.panels == 0 {
            return Err(Error::NoPanels {
                path: path.to_owned(),
            });
        }
        if header.panel_size == 0 {
            return Err(Error::ZeroPanelSize {
                path: path.to_owned(),
            });
        }
        if let Some(reason) = header.layout_problem() {
            return Err(Error::BadLayout {
                path: path.to_owned(),
                reason,
            });
        }
        let header = Header {
            flags: header.flags & !FLAG_COMPLETE,
            ..header
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create data file", path, e))?;
        write_at(&file, path, &header.encode(), 0, "write the header of")?;
        file.set_len(header.file_size())
            .map_err(|e| Error::io("set the size of", path, e))?;
        reserve_panels(&file, &header, path)?;
        Ok(Writer {
            file,
            path: path.to_owned(),
            header,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes panel `panel`: `data` must be exactly one panel. Element
    /// types other than the header's are refused, except bytes.
    pub fn write_panel<T: Element>(&mut self, panel: usize, data: &[T]) -> Result<()> {
        check_panel(
            &self.header,
            &self.path,
            panel,
            T::TYPE,
            std::mem::size_of_val(data),
        )?;
        write_at(
            &self.file,
            &self.path,
            as_bytes(data),
            self.header.panel_offset(panel),
            &format!("write panel {panel} to"),
        )
    }

    /// Makes the panels durable, then marks the file complete. Errors
    /// the kernel deferred (a full disk on file systems that allocate at
    /// write-back) surface here.
    pub fn finish(self) -> Result<Header> {
        let sync = |what: &str| {
            self.file
                .sync_all()
                .map_err(|e| Error::io(format!("flush {what} of"), &self.path, e))
        };
        // Panels first, flag second: a crash in between leaves a file
        // marked incomplete, never one marked complete with panels missing.
        sync("the panels")?;
        let header = Header {
            flags: self.header.flags | FLAG_COMPLETE,
            ..self.header
        };
        write_at(
            &self.file,
            &self.path,
            &header.encode(),
            0,
            "write the header of",
        )?;
        sync("the header")?;
        Ok(header)
    }
}

/// `pwrite`s all of `data` at `offset`, a full disk reported as such.
fn write_at(file: &File, path: &Path, data: &[u8], offset: u64, action: &str) -> Result<()> {
    file.write_all_at(data, offset)
        .map_err(|e| Error::io(action, path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_lays_panels_on_alignment() {
        let h = Header::new(3, 5000)
            .with_align(4096)
            .with_element(ElementType::F64);
        assert_eq!(h.slot_size(), 8192);
        assert_eq!(
            (h.panel_offset(0), h.panel_offset(2), h.file_size()),
            (4096, 4096 + 2 * 8192, 4096 + 3 * 8192)
        );
        let b = h.encode();
        assert_eq!(&b[0..8], b"MEMADAPT");
        assert_eq!(b[40], 9, "f64 tag");
        for t in ElementType::ALL {
            assert_eq!(ElementType::from_tag(t.tag()), Some(t));
        }
        assert_eq!(ElementType::from_tag(10), None);
    }

    #[test]
    fn impossible_layouts_are_named() {
        let h = Header::new(2, 12).with_element(ElementType::F64);
        assert!(h.layout_problem().unwrap().contains("whole number of f64"));
        assert!(Header::new(2, 8)
            .with_align(3000)
            .layout_problem()
            .unwrap()
            .contains("power of two"));
        assert!(Header::new(usize::MAX, 1 << 40)
            .layout_problem()
            .unwrap()
            .contains("do not fit"));
    }

    /// A full disk cannot be made without root, but `/dev/full` answers
    /// every write with ENOSPC: the classification is what is tested.
    #[test]
    fn a_full_disk_is_reported_as_such_with_the_path() {
        let Ok(full) = OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("no /dev/full here: skipped");
            return;
        };
        let err = write_at(
            &full,
            Path::new("/data/m.panels"),
            &[1; 64],
            0,
            "write panel 3 to",
        )
        .unwrap_err();
        assert!(err.is_disk_full(), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("cannot write panel 3 to /data/m.panels: the disk is full"),
            "{msg}"
        );
    }
}
