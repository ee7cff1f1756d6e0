//! `memgang-workload`: a synthetic stand-in for NPB-like HPC codes.
//!
//! memgang's tests and benchmarks need jobs that behave like real
//! memory-hungry parallel programs (big resident sets, every page touched
//! every iteration, ranks that wait for each other at a barrier) but whose
//! results can be checked exactly, so that a scheduler bug which loses or
//! corrupts a page while a job is stopped or swapped out is caught rather
//! than silently ignored.
//!
//! This library holds the parts that are worth unit-testing: the page visit
//! orders, the per-page update, the closed-form expected contents and the
//! verification pass. The binary (`src/main.rs`) adds the process and
//! barrier plumbing.
//!
//! Data model: rank memory is an array of pages of [`WORDS_PER_PAGE`]
//! 64-bit words. Word `j` of page `p` starts at [`Rank::initial_word`] and
//! iteration `t` adds [`Rank::delta`]`(p, t)` to every word of the page.
//! Because addition commutes, the final contents do not depend on the visit
//! order, and because the delta is linear in `t` the sum over all iterations
//! has a closed form, so verification needs neither a second copy of the data
//! nor a replay of the iterations.

pub mod args;
pub use args::Args;

use std::hint::black_box;
use std::io;
use std::ptr::NonNull;

/// Bytes per logical page. Fixed rather than queried so that results are
/// identical across machines; it matches the base page size of x86-64 and
/// most aarch64 kernels, which is what makes one visit touch one real page.
pub const PAGE_SIZE: usize = 4096;
/// 64-bit words per page.
pub const WORDS_PER_PAGE: usize = PAGE_SIZE / 8;
/// Pages per MiB.
pub const PAGES_PER_MIB: u64 = (1 << 20) / PAGE_SIZE as u64;
/// Dependent mixing rounds in one `--compute` unit.
pub const COMPUTE_ROUNDS_PER_UNIT: u64 = 512;

// Odd constant so that `j * WORD_STRIDE` differs for every word of a page:
// a word copied to the wrong offset within its page is then detected.
const WORD_STRIDE: u64 = 0x9E37_79B9_7F4A_7C15;

/// Page visit order of one iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Pattern {
    /// Pages 0, 1, ..., P-1.
    Seq,
    /// Every page once, in a pseudo-random order that changes every iteration.
    Random,
    /// Pages in order; visiting page p also reads pages p-1 and p+1.
    Stencil,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Seq => "seq",
            Pattern::Random => "random",
            Pattern::Stencil => "stencil",
        }
    }
}

/// SplitMix64 finaliser: cheap, and good enough that nearby inputs give
/// unrelated outputs.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Number of pages owned by `rank` when `total_pages` are split over
/// `ranks`: an even share, with the remainder going to the last rank.
pub fn rank_pages(total_pages: u64, ranks: u64, rank: u64) -> u64 {
    let share = total_pages / ranks;
    if rank + 1 == ranks {
        share + total_pages % ranks
    } else {
        share
    }
}

/// A pseudo-random permutation of `0..n` that needs O(1) memory.
///
/// An unbalanced Feistel network is a bijection on `0..2^bits` for any
/// round function; enumerating that domain and keeping the outputs below
/// `n` yields each of `0..n` exactly once. With `2^bits < 2n` that costs at
/// most two network evaluations per page, negligible next to touching 4 KiB.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    pub fn new(n: u64, key: u64) -> Self {
        let bits = if n <= 1 {
            0
        } else {
            64 - (n - 1).leading_zeros()
        };
        let keys = [1u64, 2, 3, 4].map(|r| mix64(key ^ r.wrapping_mul(0xA076_1D64_78BD_642F)));
        Permutation { n, bits, keys }
    }

    /// The network itself: a bijection on `0..2^bits`.
    fn feistel(&self, mut x: u64) -> u64 {
        // Halves of `a` (high) and `b` (low) bits; every round moves the low
        // half to the top and swaps the widths, so after an even number of
        // rounds the layout is back to (a, b).
        let mut a = self.bits / 2;
        let mut b = self.bits - a;
        for &k in &self.keys {
            let lo = x & low_mask(b);
            let hi = x >> b;
            x = (lo << a) | ((hi ^ mix64(k ^ lo)) & low_mask(a));
            std::mem::swap(&mut a, &mut b);
        }
        x
    }
}

impl IntoIterator for Permutation {
    type Item = u64;
    type IntoIter = PermIter;
    fn into_iter(self) -> PermIter {
        PermIter {
            domain: 1u64 << self.bits,
            next: 0,
            perm: self,
        }
    }
}

/// Iterator over a [`Permutation`].
pub struct PermIter {
    perm: Permutation,
    next: u64,
    domain: u64,
}

impl Iterator for PermIter {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        while self.next < self.domain {
            let y = self.perm.feistel(self.next);
            self.next += 1;
            if y < self.perm.n {
                return Some(y);
            }
        }
        None
    }
}

fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// A visit order for one iteration: either `0..P` or a permutation.
pub enum VisitOrder {
    InOrder(std::ops::Range<u64>),
    Permuted(PermIter),
}

impl Iterator for VisitOrder {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        match self {
            VisitOrder::InOrder(r) => r.next(),
            VisitOrder::Permuted(it) => it.next(),
        }
    }
}

/// One rank's share of the job: how its data is derived and checked.
#[derive(Clone, Copy, Debug)]
pub struct Rank {
    key: u64,
    pages: u64,
}

/// One wrong word found by [`Rank::verify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub page: u64,
    pub word: usize,
    pub expected: u64,
    pub found: u64,
}

/// Result of [`Rank::verify`].
#[derive(Clone, Debug, Default)]
pub struct Verification {
    pub checked_words: u64,
    pub bad_words: u64,
    pub bad_pages: u64,
    /// The first few mismatches, in page order.
    pub first: Vec<Mismatch>,
}

impl Verification {
    pub fn ok(&self) -> bool {
        self.bad_words == 0
    }
}

impl Rank {
    pub fn new(seed: u64, rank: u64, pages: u64) -> Self {
        let key = mix64(mix64(seed) ^ rank.wrapping_add(1).wrapping_mul(0xD6E8_FEB8_6659_FD93));
        Rank { key, pages }
    }

    pub fn pages(&self) -> u64 {
        self.pages
    }

    pub fn words(&self) -> u64 {
        self.pages * WORDS_PER_PAGE as u64
    }

    fn page_base(&self, p: u64) -> u64 {
        mix64(self.key ^ p.wrapping_mul(0x8CB9_2BA7_2F3D_8DD7))
    }

    // delta(p, t) = a + t*b: different for every page and every iteration
    // (b is odd), so a lost write or a stale page from an earlier iteration
    // shows up, yet its sum over t is closed-form.
    fn delta_coeffs(&self, p: u64) -> (u64, u64) {
        let h = mix64(self.key.rotate_left(23) ^ p.wrapping_mul(0xE703_7ED1_A0B4_28DB));
        (h, mix64(h) | 1)
    }

    /// Initial value of word `j` of page `p`.
    pub fn initial_word(&self, p: u64, j: usize) -> u64 {
        self.page_base(p)
            .wrapping_add((j as u64).wrapping_mul(WORD_STRIDE))
    }

    /// Amount added to every word of page `p` in iteration `t`.
    pub fn delta(&self, p: u64, t: u64) -> u64 {
        let (a, b) = self.delta_coeffs(p);
        a.wrapping_add(t.wrapping_mul(b))
    }

    /// `delta(p, 0) + ... + delta(p, n-1)` without the loop.
    pub fn delta_sum(&self, p: u64, n: u64) -> u64 {
        let (a, b) = self.delta_coeffs(p);
        // n(n-1)/2 is exact in u128; only its value mod 2^64 matters.
        let tri = ((n as u128) * (n.saturating_sub(1) as u128) / 2) as u64;
        n.wrapping_mul(a).wrapping_add(tri.wrapping_mul(b))
    }

    /// Contents of word `j` of page `p` after `iterations` iterations.
    pub fn expected_word(&self, p: u64, j: usize, iterations: u64) -> u64 {
        self.initial_word(p, j)
            .wrapping_add(self.delta_sum(p, iterations))
    }

    /// Writes the initial contents, which also faults in every page.
    pub fn init(&self, mem: &mut [u64]) {
        assert_eq!(mem.len() as u64, self.words());
        for (p, page) in mem.chunks_exact_mut(WORDS_PER_PAGE).enumerate() {
            fill_ramp(page, self.page_base(p as u64));
        }
    }

    /// Page order of iteration `t`.
    pub fn visit_order(&self, pattern: Pattern, t: u64) -> VisitOrder {
        match pattern {
            Pattern::Seq | Pattern::Stencil => VisitOrder::InOrder(0..self.pages),
            Pattern::Random => {
                let perm = Permutation::new(self.pages, mix64(self.key ^ mix64(t)));
                VisitOrder::Permuted(perm.into_iter())
            }
        }
    }

    /// Visits page `p` in iteration `t`: neighbour reads (stencil), the
    /// read-modify-write update, then `compute` units of CPU work.
    pub fn visit(&self, mem: &mut [u64], pattern: Pattern, p: u64, t: u64, compute: u64) {
        let pu = p as usize;
        if pattern == Pattern::Stencil {
            // The neighbours only feed black_box so that the final data stays
            // order-independent; black_box keeps the reads (and the page
            // faults they cause) from being optimised away.
            let mut acc = 0u64;
            if pu > 0 {
                acc = acc.wrapping_add(sum_page(page(mem, pu - 1)));
            }
            if p + 1 < self.pages {
                acc = acc.wrapping_add(sum_page(page(mem, pu + 1)));
            }
            black_box(acc);
        }
        let pg = page_mut(mem, pu);
        add_to_page(pg, self.delta(p, t));
        if compute > 0 {
            black_box(compute_units(pg[0], compute));
        }
    }

    /// Runs iteration `t` over the whole of `mem`.
    pub fn run_iteration(&self, mem: &mut [u64], pattern: Pattern, t: u64, compute: u64) {
        assert_eq!(mem.len() as u64, self.words());
        for p in self.visit_order(pattern, t) {
            self.visit(mem, pattern, p, t, compute);
        }
    }

    /// Checks every word against its closed-form value after `iterations`
    /// iterations, remembering up to `max_report` mismatches.
    pub fn verify(&self, mem: &[u64], iterations: u64, max_report: usize) -> Verification {
        assert_eq!(mem.len() as u64, self.words());
        let mut v = Verification {
            checked_words: self.words(),
            ..Verification::default()
        };
        for (p, pg) in mem.chunks_exact(WORDS_PER_PAGE).enumerate() {
            let p = p as u64;
            let first = self
                .page_base(p)
                .wrapping_add(self.delta_sum(p, iterations));
            // Branch-free OR of all differences vectorises; the per-word
            // walk only runs for a page that is actually wrong.
            let diff = pg
                .iter()
                .enumerate()
                .fold(0u64, |acc, (j, &w)| acc | (w ^ ramp(first, j)));
            if diff == 0 {
                continue;
            }
            v.bad_pages += 1;
            for (j, &w) in pg.iter().enumerate() {
                let expected = ramp(first, j);
                if w != expected {
                    v.bad_words += 1;
                    if v.first.len() < max_report {
                        v.first.push(Mismatch {
                            page: p,
                            word: j,
                            expected,
                            found: w,
                        });
                    }
                }
            }
        }
        v
    }

    /// Where [`corrupt_for_test`](Self::corrupt_for_test) flips a bit.
    pub fn corruption_site(&self) -> (u64, usize) {
        (self.pages / 2, 7)
    }

    /// Deliberately damages one word so that tests can prove that
    /// verification is able to fail.
    pub fn corrupt_for_test(&self, mem: &mut [u64]) -> (u64, usize) {
        let (p, j) = self.corruption_site();
        page_mut(mem, p as usize)[j] ^= 1;
        (p, j)
    }
}

#[inline(always)]
fn ramp(first: u64, j: usize) -> u64 {
    first.wrapping_add((j as u64).wrapping_mul(WORD_STRIDE))
}

#[inline(always)]
fn page(mem: &[u64], p: usize) -> &[u64] {
    &mem[p * WORDS_PER_PAGE..(p + 1) * WORDS_PER_PAGE]
}

#[inline(always)]
fn page_mut(mem: &mut [u64], p: usize) -> &mut [u64] {
    &mut mem[p * WORDS_PER_PAGE..(p + 1) * WORDS_PER_PAGE]
}

#[inline(always)]
fn fill_ramp(pg: &mut [u64], first: u64) {
    for (j, w) in pg.iter_mut().enumerate() {
        *w = ramp(first, j);
    }
}

#[inline(always)]
fn add_to_page(pg: &mut [u64], d: u64) {
    for w in pg.iter_mut() {
        *w = w.wrapping_add(d);
    }
}

#[inline(always)]
fn sum_page(pg: &[u64]) -> u64 {
    pg.iter().fold(0u64, |a, &w| a.wrapping_add(w))
}

/// `units` × [`COMPUTE_ROUNDS_PER_UNIT`] rounds of a serially dependent
/// xorshift-multiply chain. Seeding it from page data stops the compiler
/// from precomputing it; the dependency chain stops it from being
/// vectorised, so its cost is latency-bound and predictable.
pub fn compute_units(seed: u64, units: u64) -> u64 {
    let mut acc = seed | 1;
    for _ in 0..units.saturating_mul(COMPUTE_ROUNDS_PER_UNIT) {
        acc = (acc ^ (acc >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    acc
}

/// A rank's memory: anonymous private pages, with transparent hugepages
/// disabled so that the kernel swaps (and memgang accounts) them one 4 KiB
/// page at a time, as it would for a typical HPC code's heap.
pub struct Region {
    ptr: NonNull<u64>,
    words: usize,
}

impl Region {
    pub fn new(pages: u64) -> io::Result<Region> {
        let bytes = usize::try_from(pages)
            .ok()
            .and_then(|p| p.checked_mul(PAGE_SIZE))
            .filter(|&b| b > 0)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: a fresh anonymous mapping aliases nothing.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let region = Region {
            ptr: NonNull::new(ptr.cast()).expect("mmap returned NULL"),
            words: bytes / 8,
        };
        // SAFETY: the range is exactly our mapping.
        if unsafe { libc::madvise(ptr, bytes, libc::MADV_NOHUGEPAGE) } != 0 {
            let err = io::Error::last_os_error();
            // EINVAL means a kernel without THP: there is nothing to disable.
            if err.raw_os_error() != Some(libc::EINVAL) {
                return Err(err);
            }
        }
        Ok(region)
    }

    pub fn as_slice(&self) -> &[u64] {
        // SAFETY: mapping is live, page-aligned and `words` long.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.words) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.words) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no slices outlive &self.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.words * 8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATTERNS: [Pattern; 3] = [Pattern::Seq, Pattern::Random, Pattern::Stencil];

    #[test]
    fn permutation_visits_every_page_once() {
        for n in [1u64, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 1000, 4097] {
            for key in [0u64, 1, 0xdead_beef] {
                let mut seen = vec![false; n as usize];
                let mut count = 0;
                for p in Permutation::new(n, key) {
                    assert!(!seen[p as usize], "n={n} key={key}: page {p} twice");
                    seen[p as usize] = true;
                    count += 1;
                }
                assert_eq!(count, n, "n={n} key={key}");
            }
        }
    }

    #[test]
    fn random_order_is_a_permutation_and_changes_per_iteration() {
        let r = Rank::new(42, 0, 1000);
        let orders: Vec<Vec<u64>> = (0..3)
            .map(|t| r.visit_order(Pattern::Random, t).collect())
            .collect();
        for o in &orders {
            let mut s = o.clone();
            s.sort_unstable();
            assert_eq!(s, (0..1000).collect::<Vec<_>>());
            assert_ne!(*o, (0..1000).collect::<Vec<_>>());
        }
        assert_ne!(orders[0], orders[1]);
        assert_ne!(orders[1], orders[2]);
        // Deterministic from seed + iteration.
        let again: Vec<u64> = r.visit_order(Pattern::Random, 1).collect();
        assert_eq!(again, orders[1]);
    }

    #[test]
    fn closed_form_matches_simulation() {
        let r = Rank::new(7, 3, 5);
        for p in 0..5 {
            let mut sim = r.initial_word(p, 11);
            for t in 0..50 {
                assert_eq!(sim, r.expected_word(p, 11, t));
                sim = sim.wrapping_add(r.delta(p, t));
            }
        }
        // Large n exercises the wrapping triangular number.
        let n = u64::MAX - 3;
        let (a, b) = r.delta_coeffs(2);
        let tri = ((n as u128 * (n - 1) as u128) / 2) as u64;
        assert_eq!(
            r.delta_sum(2, n),
            a.wrapping_mul(n).wrapping_add(b.wrapping_mul(tri))
        );
    }

    fn run(pattern: Pattern, pages: u64, iterations: u64) -> (Rank, Vec<u64>) {
        let r = Rank::new(1, 2, pages);
        let mut mem = vec![0u64; r.words() as usize];
        r.init(&mut mem);
        for t in 0..iterations {
            r.run_iteration(&mut mem, pattern, t, 1);
        }
        (r, mem)
    }

    #[test]
    fn verify_passes_for_every_pattern() {
        for pattern in PATTERNS {
            for pages in [1, 2, 37] {
                for n in [0, 1, 4] {
                    let (r, mem) = run(pattern, pages, n);
                    let v = r.verify(&mem, n, 5);
                    assert!(v.ok(), "{pattern:?} pages={pages} n={n}: {v:?}");
                    assert_eq!(v.checked_words, pages * WORDS_PER_PAGE as u64);
                    // ...and the iteration count is part of what is checked.
                    assert!(!r.verify(&mem, n + 1, 5).ok());
                }
            }
        }
    }

    #[test]
    fn verify_catches_a_flipped_word() {
        for pattern in PATTERNS {
            let (r, mut mem) = run(pattern, 10, 3);
            let (p, j) = r.corrupt_for_test(&mut mem);
            let v = r.verify(&mem, 3, 5);
            assert_eq!((v.bad_words, v.bad_pages), (1, 1));
            let m = v.first[0];
            assert_eq!((m.page, m.word), (p, j));
            assert_eq!(m.expected, r.expected_word(p, j, 3));
            assert_eq!(m.found, m.expected ^ 1);
        }
    }

    #[test]
    fn verify_catches_swapped_and_stale_pages() {
        let (r, mut mem) = run(Pattern::Seq, 4, 2);
        let w = WORDS_PER_PAGE;
        let (a, b) = mem.split_at_mut(w);
        a.swap_with_slice(&mut b[..w]);
        assert_eq!(r.verify(&mem, 2, 0).bad_pages, 2);

        // A page that missed its last update (e.g. a lost write-back).
        let (r, mut mem) = run(Pattern::Seq, 4, 2);
        let d = r.delta(3, 1);
        for x in &mut mem[3 * w..] {
            *x = x.wrapping_sub(d);
        }
        assert_eq!(r.verify(&mem, 2, 0).bad_pages, 1);
    }

    #[test]
    fn ranks_get_different_data() {
        assert_ne!(
            Rank::new(0, 0, 1).initial_word(0, 0),
            Rank::new(0, 1, 1).initial_word(0, 0)
        );
    }

    #[test]
    fn rank_pages_split() {
        assert_eq!(rank_pages(10, 3, 0), 3);
        assert_eq!(rank_pages(10, 3, 1), 3);
        assert_eq!(rank_pages(10, 3, 2), 4);
        assert_eq!((0..3).map(|k| rank_pages(10, 3, k)).sum::<u64>(), 10);
    }

    #[test]
    fn region_is_zeroed_and_usable() {
        let mut reg = Region::new(3).unwrap();
        assert_eq!(reg.as_slice().len(), 3 * WORDS_PER_PAGE);
        assert!(reg.as_slice().iter().all(|&w| w == 0));
        let r = Rank::new(0, 0, 3);
        r.init(reg.as_mut_slice());
        r.run_iteration(reg.as_mut_slice(), Pattern::Stencil, 0, 0);
        assert!(r.verify(reg.as_slice(), 1, 1).ok());
    }
}
