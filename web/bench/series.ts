// The deterministic benchmark series shared with core/examples/bench_bank.rs (its
// function `series`): an AR(1) process around a slow sine with 1 % spikes of three times the
// level, like a bandwidth trace. Ported operation for operation so both benchmarks feed the
// same values.

/** xorshift32 seeded 12345, as u/2³²; `>>> 0` keeps every step in u32 arithmetic. */
function xorshift32(): () => number {
  let s = 12345;
  return () => {
    s = (s ^ (s << 13)) >>> 0;
    s = (s ^ (s >>> 17)) >>> 0;
    s = (s ^ (s << 5)) >>> 0;
    return s / 4294967296;
  };
}

/** The first `n` values of the benchmark series. */
export function benchSeries(n: number): Float64Array {
  const next = xorshift32();
  const out = new Float64Array(n);
  let x = 50;
  for (let i = 0; i < n; i++) {
    const u = next();
    x = 0.9 * x + 0.1 * (50 + 20 * Math.sin(i / 5000)) + (u - 0.5) * 8;
    out[i] = next() < 0.01 ? x * 3 : x;
  }
  return out;
}
