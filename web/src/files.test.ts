import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import {
  exportCsv,
  importText,
  loadForecasting,
  loadReader,
  readNdjson,
  toNdjson,
} from "./forecast";
import type { Record } from "./record";

// The page reads files with the core's reader (core/src/import, the one `nowcast forecast`
// uses) through WebAssembly; its own tests are in core/tests/import.rs, on files the real
// tools wrote. These check what the page receives.
beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
  await loadReader(
    readFileSync(new URL("../../core/pkg/reader/nowcast_reader_bg.wasm", import.meta.url)),
  );
});

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
        test_start: { protocol: "TCP", reverse },
      },
      intervals,
      end: {},
    },
    null,
    2,
  );

const fixture = (name: string) =>
  readFileSync(new URL(`../../core/tests/import/${name}`, import.meta.url), "utf8");

describe("importing files", () => {
  it("groups NDJSON records by metric, transport and target, and names each bad line", () => {
    const text = [
      JSON.stringify(rec(1000, 10)),
      JSON.stringify(rec(2000, null)),
      "{not json",
      JSON.stringify({ ...rec(3000, 11), schema_version: "2.0" }),
      JSON.stringify(rec(4000, 90, "bandwidth_down")),
      JSON.stringify({ ...rec(5000, 12), probe: { transport: "http" } }),
      JSON.stringify(rec(6000, 13)),
    ].join("\n");
    const r = importText(text);
    expect(r.format).toBe("ndjson");
    expect(r.series.map((s) => [s.name, s.metric, s.unit, s.transport, s.points.length])).toEqual([
      ["rtt to example.org:443", "rtt", "ms", undefined, 2],
      ["bandwidth_down to example.org:443", "bandwidth_down", "Mbit/s", undefined, 1],
      ["rtt/http to example.org:443", "rtt", "ms", "http", 1],
    ]);
    expect(r.series[0]!.points).toEqual([
      { t: 1000, value: 10 },
      { t: 6000, value: 13 },
    ]);
    expect(r.errors.map((e) => e.line)).toEqual([3, 4]);
    expect(r.errorCount).toBe(2);
    expect(r.errors[1]!.field).toBe("schema_version");
    expect(r.notes.join("\n")).toContain("1 records without a value");
  });

  it("reads iperf3 -J intervals as Mbit/s at the start time plus the interval's end", () => {
    const r = importText(
      iperf3(1, [
        { sum: { start: 0, end: 1, bits_per_second: 95.5e6 } },
        { sum: { start: 1, end: 2, bits_per_second: 94e6, omitted: true } },
        { sum: { start: 2, end: 3, bits_per_second: 96e6 } },
      ]),
    );
    expect(r.format).toBe("iperf3");
    expect(r.errors).toEqual([]);
    expect(r.series).toEqual([
      {
        name: "iperf3 bandwidth_down to 10.231.0.2:5201",
        metric: "bandwidth_down",
        unit: "Mbit/s",
        to: "10.231.0.2:5201",
        transport: "tcp",
        column: undefined,
        clock: "epoch",
        points: [
          { t: 1_700_000_001_000, value: 95.5 },
          { t: 1_700_000_003_000, value: 96 },
        ],
      },
    ]);
  });

  it("reads iperf3 UDP with its jitter and loss (a file iperf3 wrote)", () => {
    const r = importText(fixture("iperf3-udp.json"));
    expect(r.format).toBe("iperf3");
    const metrics = r.series.map((s) => s.metric);
    expect(metrics).toEqual(expect.arrayContaining(["bandwidth_up", "jitter", "loss"]));
    const unitOf = (m: string) => r.series.find((s) => s.metric === m)!.unit;
    expect([unitOf("jitter"), unitOf("loss")]).toEqual(["ms", "fraction"]);
  });

  it("reads ping output, mtr --json, irtt JSON and sockperf logs the tools wrote", () => {
    const read = (name: string) => {
      const r = importText(fixture(name));
      expect(r.unsupported, name).toBeUndefined();
      return r;
    };
    const ping = read("ping.txt");
    expect([ping.format, ping.series[0]!.metric, ping.series[0]!.to]).toEqual([
      "ping",
      "rtt",
      "10.231.82.2",
    ]);
    expect(read("mtr.json").format).toBe("mtr");
    expect(read("irtt.json").series.map((s) => s.metric)).toContain("rtt");
    const sockperf = read("sockperf-rtt.csv");
    expect([sockperf.format, sockperf.series[0]!.clock]).toEqual(["sockperf", "relative"]);
  });

  it("reads CSV with a header, ISO or epoch times, and names bad lines and their column", () => {
    const r = importText(
      "time,value\n1700000000000,12.5\n2023-11-14T22:13:21Z,13\n# note\nyesterday,1\n1700000002000,n/a\n",
    );
    expect(r.format).toBe("csv");
    expect(r.series.map((s) => [s.name, s.column, s.unit])).toEqual([
      ["value", "value", undefined],
    ]);
    expect(r.series[0]!.points).toEqual([
      { t: 1_700_000_000_000, value: 12.5 },
      { t: 1_700_000_001_000, value: 13 },
    ]);
    expect(r.errors.map((e) => [e.line, e.field])).toEqual([
      [5, "time"],
      [6, "value"],
    ]);
  });

  it("takes every column of numbers as a series named by its header, never a text column", () => {
    const r = importText("time,rtt_ms,host\n1000,1.5,a\n2000,1.7,b\n");
    expect(r.series.map((s) => s.name)).toEqual(["rtt_ms"]);
    expect(r.notes.join("\n")).toContain("host");
  });

  it("gives a file in no supported format one message naming what is supported", () => {
    const r = importText("hello there\nthis is prose,\nnot measurements\n");
    expect(r.series).toEqual([]);
    expect(r.errorCount).toBe(0);
    expect(r.unsupported).toMatch(/no format Nowcast reads/);
    expect(r.unsupported).toMatch(/iperf3 -J.*ping.*mtr --json.*irtt.*sockperf/);
  });
});

describe("exporting", () => {
  it("writes NDJSON the reader takes back unchanged", () => {
    const records = [rec(1000, 10), rec(2000, null)];
    expect(readNdjson(toNdjson(records)).records).toEqual(records);
  });

  it("writes the core's CSV, which imports back one series per metric, without timeouts", () => {
    const csv = exportCsv([
      { label: "RTT, WebSocket echo", records: [rec(1000, 10), rec(2000, null), rec(3000, 11)] },
      { label: "Download", records: [rec(1000, 900, "bandwidth_down")] },
    ]);
    expect(csv.split("\n")[0]).toBe("time,value,metric,unit,transport,to,series,source,from");
    expect(csv).toContain('"RTT, WebSocket echo"');
    const back = importText(csv);
    expect(back.errors).toEqual([]);
    expect(back.series.map((s) => [s.name, s.unit, s.points.map((p) => p.value)])).toEqual([
      ["rtt to example.org:443", "ms", [10, 11]],
      ["bandwidth_down to example.org:443", "Mbit/s", [900]],
    ]);
  });

  it("refuses a record the reader refuses, naming its series", () => {
    expect(() => exportCsv([{ label: "bad", records: [{ ...rec(1000, 10), to: "" }] }])).toThrow(
      /series 'bad', record 1: field 'to'/,
    );
  });
});

describe("the sample files in public/samples", () => {
  const sample = (name: string) =>
    importText(readFileSync(new URL(`../../public/samples/${name}`, import.meta.url), "utf8"));

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
