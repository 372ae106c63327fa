import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { importCsv, importText, toCsv, toNdjson } from "./files";
import { readNdjson, type Record } from "./record";

const rec = (t: number, value: number | null, metric: Record["metric"] = "rtt"): Record => ({
  schema_version: "1.0",
  timestamp_ms: t,
  source: "browser",
  metric,
  status: value === null ? "timeout" : "ok",
  value,
  unit: metric === "rtt" ? "ms" : "Mbit/s",
  to: "example.org:443",
  ...(value === null ? { timeout_ms: 1000 } : {}),
});

const iperf3 = (reverse: number, intervals: unknown[]) =>
  JSON.stringify(
    {
      start: {
        connecting_to: { host: "10.231.0.2", port: 5201 },
        timestamp: { timesecs: 1_700_000_000 },
        test_start: { reverse },
      },
      intervals,
      end: {},
    },
    null,
    2,
  );

describe("importing files", () => {
  it("groups NDJSON records by metric, source and target, and names each bad line", () => {
    const text = [
      JSON.stringify(rec(1000, 10)),
      JSON.stringify(rec(2000, null)),
      "{not json",
      JSON.stringify({ ...rec(3000, 11), schema_version: "2.0" }),
      JSON.stringify(rec(4000, 90, "bandwidth_down")),
      JSON.stringify(rec(5000, 12)),
    ].join("\n");
    const r = importText(text, "x.ndjson");
    expect(r.format).toBe("ndjson");
    expect(r.series.map((s) => [s.label, s.points.length])).toEqual([
      ["rtt from browser to example.org:443", 2],
      ["bandwidth_down from browser to example.org:443", 1],
    ]);
    expect(r.errors.map((e) => e.line)).toEqual([3, 4]);
    expect(r.errors[1]!.field).toBe("schema_version");
  });

  it("reads iperf3 -J intervals as Mbit/s at start time plus interval end", () => {
    const r = importText(
      iperf3(1, [
        { sum: { start: 0, end: 1, bits_per_second: 95.5e6 } },
        { sum: { start: 1, end: 2, bits_per_second: 94e6, omitted: true } },
        { sum: { start: 2, end: 3, bits_per_second: 96e6 } },
      ]),
      "run.json",
    );
    expect(r.format).toBe("iperf3");
    expect(r.errors).toEqual([]);
    expect(r.series).toEqual([
      {
        label: "iperf3 bandwidth_down to 10.231.0.2:5201",
        metric: "bandwidth_down",
        unit: "Mbit/s",
        points: [
          { t: 1_700_000_001_000, value: 95.5 },
          { t: 1_700_000_003_000, value: 96 },
        ],
      },
    ]);
  });

  it("tells iperf3 from NDJSON also when it is on one line, and reports its errors", () => {
    expect(importText(JSON.stringify(JSON.parse(iperf3(0, []))), "a").format).toBe("iperf3");
    const failed = importText('{"error": "unable to connect to server"}', "a");
    expect(failed.errors[0]!.message).toContain("unable to connect");
    const noStart = importText('{"intervals": []}', "a");
    expect(noStart.errors[0]!.message).toContain("timesecs");
  });

  it("reads CSV with a header, ISO or epoch times, and names bad lines and fields", () => {
    const r = importCsv(
      "time,value\n1700000000000,12.5\n2023-11-14T22:13:21Z,13\n# note\nyesterday,1\n1700000002000,n/a\n",
      "rtt.csv",
    );
    expect(r.series[0]!.points).toEqual([
      { t: 1_700_000_000_000, value: 12.5 },
      { t: 1_700_000_001_000, value: 13 },
    ]);
    expect(r.errors).toEqual([
      { line: 5, field: "time", message: '"yesterday" is not a time' },
      { line: 6, field: "value", message: '"n/a" is not a number' },
    ]);
  });
});

describe("exporting", () => {
  it("writes NDJSON the reader takes back unchanged", () => {
    const records = [rec(1000, 10), rec(2000, null)];
    expect(readNdjson(toNdjson(records)).records).toEqual(records);
  });

  it("writes CSV that imports back into the same series, without timeouts", () => {
    const csv = toCsv([
      { label: "RTT, WebSocket echo", records: [rec(1000, 10), rec(2000, null), rec(3000, 11)] },
      { label: "Download", records: [rec(1000, 900, "bandwidth_down")] },
    ]);
    const back = importText(csv, "export.csv");
    expect(back.errors).toEqual([]);
    expect(back.series.map((s) => [s.label, s.points.map((p) => p.value)])).toEqual([
      ["RTT; WebSocket echo", [10, 11]],
      ["Download", [900]],
    ]);
  });
});

describe("the sample files in public/samples", () => {
  const sample = (name: string) =>
    importText(
      readFileSync(new URL(`../../public/samples/${name}`, import.meta.url), "utf8"),
      name,
    );

  it("import as their README says", () => {
    const rtt = sample("rtt-browser.ndjson");
    expect([rtt.format, rtt.errors.length, rtt.series[0]!.points.length]).toEqual([
      "ndjson",
      0,
      298,
    ]);
    const iperf = sample("iperf3-reverse.json");
    expect([iperf.format, iperf.series[0]!.metric, iperf.series[0]!.points.length]).toEqual([
      "iperf3",
      "bandwidth_down",
      30,
    ]);
    const csv = sample("rtt.csv");
    expect([csv.format, csv.errors.length, csv.series[0]!.points.length]).toEqual(["csv", 0, 240]);
    const broken = sample("broken.ndjson");
    expect(broken.series[0]!.points.length).toBe(5);
    expect(broken.errors.map((e) => [e.line, e.field])).toEqual([
      [3, undefined],
      [5, "schema_version"],
      [6, "metric"],
      [8, "value"],
    ]);
  });
});
