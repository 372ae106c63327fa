// Reads the NWS golden trace (wasm-forecast/testdata/nws-golden-trace.csv) for tests and
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
