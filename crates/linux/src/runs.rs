//! Run geometry: stretches of contiguous pages and every way memgang cuts
//! them: merging touching runs, the first N bytes of a record and the rest,
//! pieces no longer than a kernel call takes, and batches of pieces under a
//! byte and a count limit. Written once here; paging and the executor use
//! it.

use crate::sysfs::page_size;
use std::ops::Range;

/// `pages` contiguous virtual pages from `start` (page aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Run {
    pub start: u64,
    pub pages: u64,
}

impl Run {
    pub fn bytes(&self) -> u64 {
        self.pages * page_size()
    }

    /// First address after the run.
    pub fn end(&self) -> u64 {
        self.start + self.bytes()
    }
}

/// Something that names a stretch of address space: `(start, length in
/// bytes)`. Paging takes runs or ranges alike.
pub trait Span {
    fn span(&self) -> (u64, u64);
}

impl Span for Run {
    fn span(&self) -> (u64, u64) {
        (self.start, self.bytes())
    }
}

impl Span for Range<u64> {
    fn span(&self) -> (u64, u64) {
        (self.start, self.end.saturating_sub(self.start))
    }
}

impl Span for (u64, u64) {
    fn span(&self) -> (u64, u64) {
        *self
    }
}

/// Bytes of all `runs`.
pub fn bytes(runs: &[Run]) -> u64 {
    runs.iter().map(Run::bytes).sum()
}

/// Append `[start, end)` to `runs`, merging with the last run if it touches.
pub fn push(runs: &mut Vec<Run>, start: u64, end: u64) {
    let page = page_size();
    if end <= start {
        return;
    }
    let pages = (end - start) / page;
    match runs.last_mut() {
        Some(last) if last.end() == start => last.pages += pages,
        _ => runs.push(Run { start, pages }),
    }
}

/// The `block`-aligned blocks of `block` bytes that lie wholly inside
/// `runs` (ascending, merged), as `(start, len)` spans, blocks that follow
/// each other merged.
pub fn whole_blocks(runs: &[Run], block: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for r in runs {
        let first = r.start.div_ceil(block) * block;
        let end = (r.start + r.bytes()) / block * block;
        if end <= first {
            continue;
        }
        match out.last_mut() {
            Some((s, l)) if *s + *l == first => *l += end - first,
            _ => out.push((first, end - first)),
        }
    }
    out
}

/// The first `bytes` of `runs`, cut at a page.
pub fn truncate(runs: &[Run], bytes: u64) -> Vec<Run> {
    split_at(runs, bytes).0
}

/// `runs` cut after their first `bytes` (at a page): what comes before and
/// what comes after.
pub fn split_at(runs: &[Run], bytes: u64) -> (Vec<Run>, Vec<Run>) {
    let mut left = bytes / page_size();
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    for r in runs {
        let take = r.pages.min(left);
        left -= take;
        if take > 0 {
            head.push(Run {
                start: r.start,
                pages: take,
            });
        }
        if take < r.pages {
            tail.push(Run {
                start: r.start + take * page_size(),
                pages: r.pages - take,
            });
        }
    }
    (head, tail)
}

/// Page-aligned, non-empty, ascending, with touching ranges merged.
pub fn aligned(ranges: &[Range<u64>]) -> Vec<Range<u64>> {
    let page = page_size();
    let mut v: Vec<Range<u64>> = ranges
        .iter()
        .map(|r| r.start / page * page..r.end.div_ceil(page) * page)
        .filter(|r| r.start < r.end)
        .collect();
    v.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// `spans` widened to whole pages and cut into pieces of at most `max`
/// bytes (rounded down to a page, at least one): `(start, length, index
/// of the span it came from)`.
pub fn cut<S: Span>(spans: &[S], max: u64) -> Vec<(u64, u64, usize)> {
    let page = page_size();
    let max = max.max(page) / page * page;
    let mut out = Vec::with_capacity(spans.len());
    for (i, s) in spans.iter().enumerate() {
        let (start, len) = s.span();
        let mut at = start / page * page;
        let end = start.saturating_add(len).div_ceil(page) * page;
        while at < end {
            let l = (end - at).min(max);
            out.push((at, l, i));
            at += l;
        }
    }
    out
}

/// How many pieces from `from` go into one batch: at most `max_count` and
/// at most `max_bytes` together, and always at least one (a longer piece
/// alone).
pub fn batch_len(
    pieces: &[(u64, u64, usize)],
    from: usize,
    max_bytes: u64,
    max_count: usize,
) -> usize {
    let mut total = 0;
    let mut n = 0;
    for &(_, len, _) in pieces[from..].iter().take(max_count) {
        if n > 0 && total + len > max_bytes {
            break;
        }
        total += len;
        n += 1;
    }
    n
}

/// `pieces` as consecutive batches of at most `max_bytes` each.
pub fn batches(pieces: &[(u64, u64, usize)], max_bytes: u64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut from = 0;
    while from < pieces.len() {
        let n = batch_len(pieces, from, max_bytes, usize::MAX);
        out.push(from..from + n);
        from += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_blocks_are_aligned_and_inside_the_runs() {
        let p = page_size();
        let b = 512 * p;
        let runs = [
            // Starts a page past a block: only the next two blocks are whole.
            Run {
                start: b + p,
                pages: 3 * 512,
            },
            // Ends where the next one starts: merged.
            Run {
                start: 8 * b,
                pages: 512,
            },
            Run {
                start: 9 * b,
                pages: 512,
            },
            // Shorter than a block.
            Run {
                start: 20 * b,
                pages: 511,
            },
        ];
        assert_eq!(whole_blocks(&runs, b), [(2 * b, 2 * b), (8 * b, 2 * b)]);
    }

    #[test]
    fn runs_merge_when_they_touch() {
        let p = page_size();
        let mut runs = Vec::new();
        push(&mut runs, 0x10000, 0x10000 + 2 * p);
        push(&mut runs, 0x10000 + 2 * p, 0x10000 + 5 * p);
        push(&mut runs, 0x10000 + 6 * p, 0x10000 + 7 * p);
        push(&mut runs, 0x20000, 0x20000); // empty: ignored
        assert_eq!(
            runs,
            [
                Run {
                    start: 0x10000,
                    pages: 5
                },
                Run {
                    start: 0x10000 + 6 * p,
                    pages: 1
                }
            ]
        );
        assert_eq!(bytes(&runs), 6 * p);
        assert_eq!(runs[0].end(), 0x10000 + 5 * p);
        assert_eq!(runs[1].span(), (0x10000 + 6 * p, p));
        assert_eq!((0x1000u64..0x3000).span(), (0x1000, 0x2000));
    }

    #[test]
    fn split_cuts_at_a_page_and_loses_nothing() {
        let ps = page_size();
        let run = |start, pages| Run { start, pages };
        let runs = [run(0, 3), run(10 * ps, 4)];
        let (head, tail) = split_at(&runs, 5 * ps);
        assert_eq!(head, [run(0, 3), run(10 * ps, 2)]);
        assert_eq!(tail, [run(12 * ps, 2)]);
        assert_eq!(truncate(&runs, 5 * ps + ps / 2), head);
        let (head, tail) = split_at(&runs, 0);
        assert!(head.is_empty());
        assert_eq!(tail, runs);
        let (head, tail) = split_at(&runs, 100 * ps);
        assert_eq!(head, runs);
        assert!(tail.is_empty());
    }

    #[test]
    fn ranges_are_aligned_sorted_and_merged() {
        let p = page_size();
        let r = aligned(&[5 * p..6 * p + 1, p + 3..2 * p, 2 * p..3 * p, 9 * p..9 * p]);
        assert_eq!(r, vec![p..3 * p, 5 * p..7 * p]);
    }

    #[test]
    fn pieces_and_batches_keep_their_limits() {
        let p = page_size();
        let big = 3 * 64 * p + p;
        let ps = cut(&[(0x1000_0000, big), (0x90_0000_0000, p / 2)], 64 * p);
        assert_eq!(ps.len(), 5);
        assert!(ps.iter().all(|x| x.1 <= 64 * p && x.1 % p == 0));
        assert_eq!(ps[..4].iter().map(|x| x.1).sum::<u64>(), big);
        // Half a page becomes the whole page.
        assert_eq!(ps[4], (0x90_0000_0000, p, 1));
        assert_eq!(batch_len(&ps, 0, 64 * p, 10), 1);
        assert_eq!(batch_len(&ps, 0, 150 * p, 10), 2);
        assert_eq!(batch_len(&ps, 0, u64::MAX, 2), 2);
        assert_eq!(batches(&ps, 128 * p), [0..2, 2..5]);
        let runs = [Run { start: 0, pages: 5 }];
        assert_eq!(
            cut(&runs, 2 * p),
            [(0, 2 * p, 0), (2 * p, 2 * p, 0), (4 * p, p, 0)]
        );
    }
}
