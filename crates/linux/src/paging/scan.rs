//! Which pages of a process are resident, swapped or huge: the
//! `PAGEMAP_SCAN` ioctl (Linux 6.7) over the job's anonymous ranges, or
//! `/proc/<pid>/pagemap` read entry by entry where the kernel lacks it.
//! [`super::record`] and the page-in's swapped part are made from these
//! scans.

use super::{ensure_alive, open_pidfd, page_size, proc_error, proc_file, ScanMethod, RETRIES};
use crate::error::Result;
use crate::runs::{self, Run};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// Output vector of one `PAGEMAP_SCAN` call, in regions (24 bytes each, so
/// 96 KiB). A compact job has far fewer runs and is done in one call; a
/// fragmented one takes more calls instead of an unbounded buffer.
const SCAN_REGIONS: usize = 4096;

/// `/proc/<pid>/pagemap` entries per read in the fallback scan: 512 KiB of
/// entries cover 256 MiB of address space per syscall.
const PAGEMAP_CHUNK: usize = 1 << 16;

// --- PAGEMAP_SCAN, include/uapi/linux/fs.h (Linux 6.7) --------------------

/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`: `[start, end)` with the (returned) categories.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

const PAGE_IS_FILE: u64 = 1 << 2;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_SWAPPED: u64 = 1 << 4;
const PAGE_IS_PFNZERO: u64 = 1 << 5;
const PAGE_IS_HUGE: u64 = 1 << 6;

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 =
    (3 << 30) | ((std::mem::size_of::<PmScanArg>() as u64) << 16) | ((b'f' as u64) << 8) | 16;

/// `/proc/<pid>/pagemap` entry bits (Documentation/admin-guide/mm/pagemap.rst).
const PM_PRESENT: u64 = 1 << 63;
const PM_SWAP: u64 = 1 << 62;
const PM_FILE_OR_SHARED_ANON: u64 = 1 << 61;

/// Which pages a scan looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pages {
    /// In RAM and anonymous: what a record keeps.
    Resident,
    /// Mapped by a swap entry (on swap, or still in the swap cache): what
    /// a page-in has to bring back.
    Swapped,
    /// In RAM, anonymous and mapped by a huge page: what a huge-page
    /// restore puts back. Only the ioctl knows (pagemap has no such bit).
    Huge,
}

/// Resident anonymous runs of `ranges`; `Ok(None)` if `method` is the ioctl
/// and this kernel does not have it.
pub(super) fn scan(
    pid: i32,
    ranges: &[Range<u64>],
    method: ScanMethod,
    want: Pages,
) -> Result<Option<Vec<Run>>> {
    let action = "scanning the page tables of";
    let fd = open_pidfd(pid, action)?;
    let path = proc_file(pid, "pagemap");
    let file = File::open(&path).map_err(|e| proc_error(pid, action, path.clone(), e))?;
    ensure_alive(&fd, action)?;
    let ranges = runs::aligned(ranges);
    let result = match (method, want) {
        (ScanMethod::PagemapScan, _) => scan_ioctl(&file, &ranges, want),
        (ScanMethod::PagemapRead, Pages::Huge) => Ok(None),
        (ScanMethod::PagemapRead, _) => scan_read(&file, &ranges, want).map(Some),
    };
    result.map_err(|e| proc_error(pid, action, path, e))
}

fn scan_ioctl(file: &File, ranges: &[Range<u64>], want: Pages) -> io::Result<Option<Vec<Run>>> {
    let (category_mask, category_inverted, return_mask) = match want {
        // Present, and neither a file page nor the zero page.
        Pages::Resident => (
            PAGE_IS_PRESENT | PAGE_IS_FILE | PAGE_IS_PFNZERO,
            PAGE_IS_FILE | PAGE_IS_PFNZERO,
            PAGE_IS_PRESENT,
        ),
        Pages::Swapped => (PAGE_IS_SWAPPED, 0, PAGE_IS_SWAPPED),
        Pages::Huge => (
            PAGE_IS_PRESENT | PAGE_IS_HUGE | PAGE_IS_FILE,
            PAGE_IS_FILE,
            PAGE_IS_HUGE,
        ),
    };
    let mut regions = vec![PageRegion::default(); SCAN_REGIONS];
    let mut runs = Vec::new();
    let mut first = true;
    for r in ranges {
        let mut start = r.start;
        let mut retries = 0;
        while start < r.end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                start,
                end: r.end,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                category_mask,
                category_inverted,
                return_mask,
                ..Default::default()
            };
            // SAFETY: arg is a valid pm_scan_arg whose vec points at
            // `regions`, which has room for vec_len entries and outlives the
            // call; the kernel writes only there and into arg.
            let n = unsafe {
                libc::ioctl(
                    file.as_raw_fd(),
                    PAGEMAP_SCAN as libc::Ioctl,
                    &mut arg as *mut PmScanArg,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) | Some(libc::EAGAIN) if retries < RETRIES => {
                        retries += 1;
                        continue;
                    }
                    Some(libc::ENOTTY) | Some(libc::EINVAL) if first => return Ok(None),
                    _ => return Err(e),
                }
            }
            first = false;
            let n = (n as usize).min(regions.len());
            for reg in &regions[..n] {
                runs::push(&mut runs, reg.start, reg.end);
            }
            // The kernel stops early only when our vector is full (we set
            // no max_pages); walk_end then says where to go on. A walk that
            // ended with room to spare is complete, whatever walk_end says:
            // the kernel fills our vector through an internal one of 512
            // regions and, when its last internal pass completes, leaves
            // walk_end where the previous pass stopped (seen on 6.18), so
            // going on from there would report regions twice.
            if n < regions.len() {
                break;
            }
            let next = arg.walk_end.max(regions[n - 1].end);
            if next <= start {
                break;
            }
            start = next;
        }
    }
    // A record is kept for a quantum or more: not the growth's spare
    // capacity (up to as much again) beside it (docs/scale.md).
    runs.shrink_to_fit();
    Ok(Some(runs))
}

fn scan_read(file: &File, ranges: &[Range<u64>], want: Pages) -> io::Result<Vec<Run>> {
    let page = page_size();
    let mut entries = vec![0u64; PAGEMAP_CHUNK];
    let mut runs = Vec::new();
    for r in ranges {
        let mut vpn = r.start / page;
        let end_vpn = r.end / page;
        while vpn < end_vpn {
            let n = ((end_vpn - vpn) as usize).min(PAGEMAP_CHUNK);
            // SAFETY: viewing n initialised u64s as their 8 * n bytes.
            let bytes =
                unsafe { std::slice::from_raw_parts_mut(entries.as_mut_ptr().cast::<u8>(), n * 8) };
            match file.read_exact_at(bytes, vpn * 8) {
                Ok(()) => {}
                // A process without an address space any more reads empty.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH))
                }
                Err(e) => return Err(e),
            }
            for (i, &e) in entries[..n].iter().enumerate() {
                let hit = match want {
                    Pages::Resident => e & PM_PRESENT != 0 && e & PM_FILE_OR_SHARED_ANON == 0,
                    Pages::Swapped => e & PM_SWAP != 0,
                    // Not in pagemap's bits: `scan` does not read for it.
                    Pages::Huge => false,
                };
                if hit {
                    let a = (vpn + i as u64) * page;
                    runs::push(&mut runs, a, a + page);
                }
            }
            vpn += n as u64;
        }
    }
    runs.shrink_to_fit();
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uapi_layout() {
        assert_eq!(std::mem::size_of::<PmScanArg>(), 96);
        assert_eq!(std::mem::size_of::<PageRegion>(), 24);
        assert_eq!(PAGEMAP_SCAN, 0xc060_6610);
    }
}
