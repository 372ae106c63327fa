import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting, loadReader } from "../forecast";
import type { ImportedEvent, PredictabilityEvent, WorkerEvent } from "../messages";
import { Imports } from "./imports";

beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
  await loadReader(
    readFileSync(new URL("../../../core/pkg/reader/nowcast_reader_bg.wasm", import.meta.url)),
  );
});

/** Imports without a history, whose events and failures are collected; `reader` loads the
 *  file readers' module (loaded above). */
function imports(reader: () => Promise<void> = () => loadReader()) {
  const events: WorkerEvent[] = [];
  const failures: string[] = [];
  const i = new Imports(
    () => undefined,
    () => Promise.resolve(),
    (e) => events.push(e),
    (m) => failures.push(m),
    reader,
  );
  /** Imports `text` as `file` and waits for it to be read and forecast. */
  const add = async (file: string, text: string) => {
    i.add(file, text);
    for (let n = 0; n < 20 && !events.some((e) => e.type === "imported"); n++) {
      await new Promise((r) => setTimeout(r, 0));
    }
    return events.find((e): e is ImportedEvent => e.type === "imported")!;
  };
  return { i, events, failures, add };
}

describe("an imported series", () => {
  it("is not read when the file readers' module cannot be loaded, and says why", async () => {
    const { i, events, failures } = imports(() =>
      Promise.reject(new Error("nowcast_reader_bg.wasm: 404")),
    );
    i.add("rtt.csv", "1,10\n2,12\n");
    for (let n = 0; n < 20 && failures.length === 0; n++) {
      await new Promise((r) => setTimeout(r, 0));
    }
    expect(failures).toEqual(["import failed: nowcast_reader_bg.wasm: 404"]);
    expect(events).toEqual([]);
  });

  it("is forecast in time order, each point with the forecast after it, without timeouts", async () => {
    const { i, events, failures, add } = imports();
    const ev = await add("rtt.csv", "time,value\n3000,14\n1000,10\n2000,12\n");
    expect(failures).toEqual([]);
    const [s] = ev.series;
    expect(s!.points.map((p) => p.t)).toEqual([1000, 2000, 3000]);
    expect(ev.notes).toContain(
      "value: 2 values are earlier than a value before them in the file (shown and forecast in time order)",
    );
    expect(s!.points[0]!.next).toEqual({
      value: 10,
      error: 0,
      errorKnown: false,
      method: "last_value",
    });
    expect(s!.mae).toBeGreaterThan(0);
    expect(i.predictability(s!.key)).toBe(true);
    const p = events.find((e): e is PredictabilityEvent => e.type === "predictability")!;
    // Two forecasts were made before a value: two errors.
    expect(p.histogram?.counts.reduce((a, b) => a + b, 0)).toBe(2);
    expect(p.cdf.at(-1)?.p).toBe(1);
    expect(p.table.some((row) => row.id === p.selected)).toBe(true);
    i.clear();
  });

  it("refuses a value beyond the bank's range by its line, and forecasts the others", async () => {
    const { add, failures } = imports();
    const ev = await add("big.csv", "1,1e200\n2,10\n3,1e300\n4,12\n");
    expect(failures).toEqual([]);
    expect(ev.errorCount).toBe(2);
    expect(ev.errors.map((e) => e.line)).toEqual([1, 3]);
    expect(ev.series[0]!.points.map((p) => [p.value, p.next?.value])).toEqual([
      [10, 10],
      [12, 12],
    ]);
  });
});

describe("a file of a real tool, or of none", () => {
  it("keeps each series' name and unit, and tells an unsupported file once", async () => {
    const fixture = (name: string) =>
      readFileSync(new URL(`../../../core/tests/import/${name}`, import.meta.url), "utf8");
    const udp = await imports().add("udp.json", fixture("iperf3-udp.json"));
    expect(udp.format).toBe("iperf3");
    const byUnit = Object.fromEntries(udp.series.map((s) => [s.label.split(" ")[1], s.unit]));
    expect(byUnit).toMatchObject({ jitter: "ms", loss: "fraction" });
    expect(udp.series.every((s) => s.label.endsWith(" (udp.json)"))).toBe(true);

    const prose = await imports().add("notes.txt", "dear diary\ntoday, the link was slow\n");
    expect(prose.series).toEqual([]);
    expect(prose.errorCount).toBe(0);
    expect(prose.notes).toHaveLength(1);
    expect(prose.notes[0]).toMatch(/no format Nowcast reads.*iperf3 -J/);
  });
});

describe("restoring saved imports", () => {
  it("skips a damaged saved item with a message and restores the others", async () => {
    const good = {
      id: 1,
      file: "a.csv",
      format: "csv",
      label: "rtt (a.csv)",
      unit: "ms",
      points: [
        { t: 1000, value: 10 },
        { t: 2000, value: 12 },
      ],
    };
    const damaged = [
      { id: 2, file: "b.csv", format: "csv", label: "no points", unit: "ms" },
      { ...good, id: 3, label: "a NaN", points: [{ t: 1, value: Number.NaN }] },
      null,
      { ...good, id: 5, label: "out of order", points: [...good.points].reverse() },
      { ...good, id: 4, label: "after the damage" },
    ];
    const history = { imports: () => Promise.resolve([good, ...damaged]) };
    const events: WorkerEvent[] = [];
    const failures: string[] = [];
    const i = new Imports(
      () => history as never,
      () => Promise.resolve(),
      (e) => events.push(e),
      (m) => failures.push(m),
      () => loadReader(),
    );
    i.restore();
    for (let n = 0; n < 50 && events.length < 2; n++) {
      await new Promise((r) => setTimeout(r, 0));
    }
    const restored = events.filter((e): e is ImportedEvent => e.type === "imported");
    expect(restored.map((e) => e.series[0]!.label)).toEqual(["rtt (a.csv)", "after the damage"]);
    expect(failures).toEqual([
      'a saved import ("no points") could not be restored and was skipped: it has no list of points',
      'a saved import ("a NaN") could not be restored and was skipped: point 1 is not a finite time and value',
      "a saved import (without a name) could not be restored and was skipped: not an object",
      'a saved import ("out of order") could not be restored and was skipped: point 2 is earlier than the one before it',
    ]);
    i.clear();
  });
});
