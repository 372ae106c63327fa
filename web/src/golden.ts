// Reads the NWS golden traces for tests and benchmarks that check an implementation against
// the original library's numbers: the ten-value trace (core/testdata/nws-golden-trace.csv,
// its input on a '# input:' line) and the 2,000-value one (nws-golden-long.csv, its input in
// nws-golden-long-input.txt), which also holds every primary's own forecast (p0..p17).

export interface GoldenRow {
  k: number;
  next: number;
  mse_forecast: number;
  mae_forecast: number;
  mse_error: number;
  mae_error: number;
  mse_method: number;
  mae_method: number;
  /** Each primary's forecast (undefined where it has none); long trace only. */
  primaries?: (number | undefined)[];
}

export interface Golden {
  series: number[];
  rows: GoldenRow[];
}

/**
 * Parses a golden trace. `input` is the separate input file of the long trace; without it
 * the series is read from the trace's '# input:' line.
 */
export function parseGolden(text: string, input?: string): Golden {
  let series: number[];
  if (input !== undefined) {
    series = input
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map(Number);
  } else {
    const line = text.split("\n").find((l) => l.startsWith("# input: "));
    if (line === undefined) throw new Error("golden trace: no '# input:' line");
    series = line.slice("# input: ".length).split(",").map(Number);
  }
  const lines = text.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("#"));
  const header = lines.shift()?.split(",") ?? [];
  const firstPrimary = header.indexOf("p0");
  const rows = lines.map((line) => {
    const cells = line.split(",");
    const row: Record<string, unknown> = {};
    header.forEach((name, i) => {
      if (firstPrimary < 0 || i < firstPrimary) row[name] = Number(cells[i] ?? NaN);
    });
    if (firstPrimary >= 0) {
      row.primaries = cells
        .slice(firstPrimary)
        .map((c) => (c.trim() === "" ? undefined : Number(c)));
    }
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
 * differs from the original's by more than `tolerance` (relative above 1, absolute below);
 * empty when all match. The short trace prints 7 significant digits (1e-6, the default);
 * the long one 17 (1e-9). With `primaries`, each primary's forecast is checked too where
 * the trace has them.
 */
export function goldenMismatches(
  golden: Golden,
  update: (x: number) => void,
  forecast: () => GoldenForecast | undefined,
  options: { tolerance?: number; primaries?: () => (number | null | undefined)[] } = {},
): string[] {
  const out: string[] = [];
  const rel = options.tolerance ?? 1e-6;
  const close = (got: number, want: number) =>
    Math.abs(got - want) <= rel * Math.max(1, Math.abs(want));
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
      if (!close(got, want)) out.push(`k=${row.k}: ${name} ${got} ≠ ${want}`);
    }
    if (f.mse.method !== row.mse_method) out.push(`k=${row.k}: mse_method ${f.mse.method}`);
    if (f.mae.method !== row.mae_method) out.push(`k=${row.k}: mae_method ${f.mae.method}`);
    if (options.primaries !== undefined && row.primaries !== undefined) {
      const got = options.primaries();
      row.primaries.forEach((want, j) => {
        const g = got[j] ?? undefined;
        const same = want === undefined ? g === undefined : g !== undefined && close(g, want);
        if (!same) out.push(`k=${row.k}: p${j} ${g} ≠ ${want}`);
      });
    }
  }
  return out;
}
