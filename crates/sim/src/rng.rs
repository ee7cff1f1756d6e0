//! The simulator's one source of randomness: PCG seeded by the user, so a
//! seed gives the same run on every machine.

use rand_pcg::rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

pub struct Rng(Pcg64Mcg);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(Pcg64Mcg::seed_from_u64(seed))
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn f64(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Pareto with this mean and shape (> 1), at most `cap`: scale =
    /// mean·(shape-1)/shape.
    pub fn pareto(&mut self, mean: f64, shape: f64, cap: f64) -> f64 {
        let scale = mean * (shape - 1.0) / shape;
        (scale / (1.0 - self.f64()).powf(1.0 / shape)).min(cap)
    }

    /// Uniform in 0..n (n > 0); the bias of a 64-bit modulo is negligible here.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }
}
