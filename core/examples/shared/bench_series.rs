//! The benchmark's series, shared by `bench_bank` (speed) and `evaluate` (a check on a
//! spiky series that no setting was chosen on).

/// Deterministic test series shared with the WASM and TypeScript benchmarks (same
/// generator in `web/bench/series.ts`).
pub fn series(n: usize) -> Vec<f64> {
    let mut s: u32 = 12345;
    let mut next = || {
        // xorshift32, so that TypeScript can produce the identical series
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s as f64 / 4294967296.0
    };
    let mut x = 50.0;
    (0..n)
        .map(|i| {
            let u = next();
            x = 0.9 * x + 0.1 * (50.0 + 20.0 * (i as f64 / 5000.0).sin()) + (u - 0.5) * 8.0;
            if next() < 0.01 {
                x * 3.0
            } else {
                x
            }
        })
        .collect()
}
