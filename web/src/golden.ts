// Reads the NWS golden trace (core/testdata/nws-golden-trace.csv) for tests and
// benchmarks that check an implementation against the original library's numbers.

export interface GoldenRow {
  k: number;
  next: number;
  mse_forecast: number;
  mae_forecast: number;
  mse_error: number;
  mae_error: number;
  mse_method: number;
  mae_method: number;
}

export function parseGolden(text: string): { series: number[]; rows: GoldenRow[] } {
  const input = text.split("\n").find((l) => l.startsWith("# input: "));
  if (input === undefined) throw new Error("golden trace: no '# input:' line");
  const series = input.slice("# input: ".length).split(",").map(Number);
  const lines = text.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("#"));
  const header = lines.shift()?.split(",") ?? [];
  const rows = lines.map((line) => {
    const cells = line.split(",").map(Number);
    const row: Record<string, number> = {};
    header.forEach((name, i) => (row[name] = cells[i] ?? NaN));
    return row as unknown as GoldenRow;
  });
  return { series, rows };
}

/** The reported forecasts of a bank, as both the WASM wrapper and the TS bank give them. */
export interface GoldenForecast {
  mse: { value: number; method: number; error: number };
  mae: { value: number; method: number; error: number };
}

/**
 * Feeds the golden series to a bank (`update`, then `forecast`) and lists every number that
 * differs from the original's by more than 1e-6 (relative above 1); empty when all match.
 */
export function goldenMismatches(
  golden: { series: number[]; rows: GoldenRow[] },
  update: (x: number) => void,
  forecast: () => GoldenForecast | undefined,
): string[] {
  const out: string[] = [];
  const tol = (v: number) => 1e-6 * Math.max(1, Math.abs(v));
  for (const row of golden.rows) {
    update(golden.series[row.k - 1]!);
    const f = forecast();
    if (f === undefined) {
      out.push(`k=${row.k}: no forecast`);
      continue;
    }
    const pairs: [string, number, number][] = [
      ["mse_forecast", f.mse.value, row.mse_forecast],
      ["mae_forecast", f.mae.value, row.mae_forecast],
      ["mse_error", f.mse.error, row.mse_error],
      ["mae_error", f.mae.error, row.mae_error],
    ];
    for (const [name, got, want] of pairs) {
      if (!(Math.abs(got - want) <= tol(want))) out.push(`k=${row.k}: ${name} ${got} ≠ ${want}`);
    }
    if (f.mse.method !== row.mse_method) out.push(`k=${row.k}: mse_method ${f.mse.method}`);
    if (f.mae.method !== row.mae_method) out.push(`k=${row.k}: mae_method ${f.mae.method}`);
  }
  return out;
}
