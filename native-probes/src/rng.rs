//! A small seeded random number generator (SplitMix64, Steele, Lea & Flood, "Fast splittable
//! pseudorandom number generators", OOPSLA 2014, §3): the cores take their randomness as an
//! argument, and the edges and experiments make it from a seed they can print, so any run
//! replays exactly.

/// SplitMix64: 64 bits of state, every seed valid, equidistributed output.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [-1, 1): noise around a value.
    pub fn symmetric(&mut self) -> f64 {
        2.0 * self.unit() - 1.0
    }

    /// Exponential with mean `mean`.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// Pareto with scale `xm` and shape `alpha` (heavy-tailed for alpha ≤ 2).
    pub fn pareto(&mut self, xm: f64, alpha: f64) -> f64 {
        xm / (1.0 - self.unit()).powf(1.0 / alpha)
    }

    /// Lognormal: exp(mu + sigma·N(0,1)), the normal by Box–Muller.
    pub fn lognormal(&mut self, mu: f64, sigma: f64) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        let n = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        (mu + sigma * n).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_stream_and_units_stay_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let x = a.unit();
            assert_eq!(x, b.unit());
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        // The mean of 10,000 uniforms is 0.5 ± 0.003 (one σ); allow five σ.
        assert!((sum / 10_000.0 - 0.5).abs() < 0.015, "{}", sum / 10_000.0);
        assert_ne!(Rng::new(8).next_u64(), Rng::new(7).next_u64());
    }

    #[test]
    fn exponential_and_pareto_have_their_means() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let m: f64 = (0..n).map(|_| r.exp(3.0)).sum::<f64>() / n as f64;
        assert!((m - 3.0).abs() < 0.05, "{m}");
        // Pareto(1, 3) has mean 1.5.
        let p: f64 = (0..n).map(|_| r.pareto(1.0, 3.0)).sum::<f64>() / n as f64;
        assert!((p - 1.5).abs() < 0.03, "{p}");
    }
}
