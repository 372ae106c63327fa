import { readdirSync, readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting, loadReader, parseRecord, readNdjson, toLine } from "./forecast";
import { RecordError, type Congestion, type Record } from "./record";

// The page's record reader is the core's (core/src/record.rs) through WebAssembly: these are
// its tests as the page sees it, against the schema's shared examples and the schema itself.
beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
  await loadReader(
    readFileSync(new URL("../../core/pkg/reader/nowcast_reader_bg.wasm", import.meta.url)),
  );
});

const examples = new URL("../../public/schema/examples/", import.meta.url);
const validText = readFileSync(new URL("valid.ndjson", examples), "utf8");
const validLines = validText.split("\n").filter((l) => l.trim() !== "");
const invalid = readdirSync(new URL("invalid/", examples))
  .filter((name) => name.endsWith(".json"))
  .map((name) => ({
    name,
    field: name.split("--")[0]!,
    text: readFileSync(new URL(`invalid/${name}`, examples), "utf8").trim(),
  }));

function refusal(line: string): RecordError {
  try {
    parseRecord(line);
  } catch (e) {
    if (e instanceof RecordError) return e;
    throw e;
  }
  throw new Error(`accepted: ${line}`);
}

const good = {
  schema_version: "1.0",
  timestamp_ms: 1,
  source: "browser",
  metric: "rtt",
  value: 2,
  unit: "ms",
  to: "x",
};
const goodLine = JSON.stringify(good);

describe("the shared record examples", () => {
  it("reads every valid line, and each round-trips through toLine", () => {
    const { records, errors } = readNdjson(validText);
    expect(errors).toEqual([]);
    expect(records.length).toBe(validLines.length);
    expect(records[2]!.metric).toBe("bandwidth_down");
    expect(records[4]!.status).toBe("timeout");
    expect(records[0]!.status).toBe("ok");
    expect(records.at(-1)).not.toHaveProperty("a_field_from_a_later_minor_version");
    for (const r of records) {
      const line = toLine(r);
      expect(parseRecord(line)).toEqual(r);
      expect(toLine(parseRecord(line))).toBe(line);
    }
  });

  it("refuses every invalid file, naming the field of its file name", () => {
    expect(invalid.length).toBeGreaterThanOrEqual(10);
    for (const { name, field, text } of invalid) {
      expect(refusal(text).field, name).toBe(field);
    }
  });

  it("agree with the JSON Schema itself (Ajv, draft 2020-12)", () => {
    const schema: object = JSON.parse(
      readFileSync(
        new URL("../../public/schema/measurement-record.v1.schema.json", import.meta.url),
        "utf8",
      ),
    );
    const check = new Ajv2020({ strict: false }).compile(schema);
    for (const line of validLines) expect(check(JSON.parse(line)), line).toBe(true);
    for (const { name, text } of invalid) expect(check(JSON.parse(text)), name).toBe(false);
  });
});

describe("parseRecord", () => {
  it.each([
    // V8 names no place here ("Unexpected token 'o', … is not valid JSON"): the reader does.
    ["not json", undefined, /^not valid JSON \(Unexpected token .* at column 2\)$/],
    ['{"a":1,}', undefined, /^not valid JSON \([^()]* at column 8\)$/],
    ["[1]", undefined, /JSON object/],
    [goodLine.replace('"1.0"', "1"), "schema_version", /must be a string/],
    [goodLine.replace("1.0", "1"), "schema_version", /not MAJOR.MINOR/],
    [goodLine.replace("1.0", "0.9"), "schema_version", /not a known version/],
    [goodLine.replace("1.0", "3.1"), "schema_version", /version 3.1 is newer than this reader/],
    // JSON.parse reads 1e400 as Infinity; the reader refuses it.
    [goodLine.replace('"value":2', '"value":1e400'), "value", /finite/],
    [goodLine.replace('"value":2', '"value":-1'), "value", /outside/],
    [goodLine.replace('"x"', '""'), "to", /must not be empty/],
    [goodLine.replace('"browser"', "null"), "source", /must not be null/],
    [goodLine.replace('"rtt"', '"loss"').replace('"ms"', '"fraction"'), "value", /fraction/],
    // Fields are checked in the schema's order: of two wrong fields the first is named.
    [goodLine.replace('"x"', "5").replace('"ms"', "5"), "unit", /must be a string/],
    [JSON.stringify({ ...good, status: "timeout", timeout_ms: 0 }), "timeout_ms", /positive/],
    [JSON.stringify({ ...good, seq: -1 }), "seq", /not a whole number/],
    [JSON.stringify({ ...good, seq: 1.5 }), "seq", /not a whole number/],
    [JSON.stringify({ ...good, probe: { streams: 2 ** 32 } }), "probe.streams", /in range/],
    [JSON.stringify({ ...good, probe: { streams: 0 } }), "probe.streams", /at least 1/],
    [JSON.stringify({ ...good, probe: { raw_ms: -1 } }), "probe.raw_ms", /non-negative/],
    [JSON.stringify({ ...good, from: null }), "from", /must not be null/],
    [JSON.stringify({ ...good, source: "s".repeat(65) }), "source", /longer than 64/],
    [JSON.stringify({ ...good, schema_version: "01.0" }), "schema_version", /MAJOR.MINOR/],
    [JSON.stringify({ ...good, probe: { transport: "quic" } }), "probe.transport", /quic/],
    [JSON.stringify({ ...good, probe: "tcp" }), "probe", /must be an object/],
    [JSON.stringify({ ...good, forecast: { value: 1, method: "m" } }), "forecast.selector", null],
    [
      JSON.stringify({ ...good, forecast: { value: 1, method: "", selector: "mse", error: 0 } }),
      "forecast.method",
      /empty/,
    ],
    [
      JSON.stringify({ ...good, forecast: { value: 1, method: "m", selector: "mse", error: -1 } }),
      "forecast.error",
      /non-negative/,
    ],
  ])("%s → %s", (line, field, message) => {
    const e = refusal(line);
    expect(e.field).toBe(field);
    if (message !== null) expect(e.message).toMatch(message);
  });

  it("counts a text field's characters, not its bytes", () => {
    expect(parseRecord(JSON.stringify({ ...good, source: "é".repeat(64) })).source).toBe(
      "é".repeat(64),
    );
  });

  it("reads any 1.x version", () => {
    for (const v of ["1.0", "1.3", "1.10"]) {
      expect(parseRecord(goodLine.replace("1.0", v)).schema_version).toBe(v);
    }
  });

  it("defaults status and value and reads integral numbers as integers", () => {
    expect(parseRecord(JSON.stringify(good))).toEqual({ ...good, status: "ok" });
    expect(parseRecord(goodLine.replace("}", ',"seq":5.0}')).seq).toBe(5);
    const { value: _, ...withoutValue } = good;
    const t = parseRecord(JSON.stringify({ ...withoutValue, status: "error" }));
    expect(t.value).toBeNull();
    expect(toLine(t)).toContain('"status":"error","value":null');
  });

  it("names the field in the error's text", () => {
    expect(String(refusal(goodLine.replace('"x"', '""')))).toBe("field 'to': must not be empty");
  });
});

describe("a FOBS congestion event (schema 1.2)", () => {
  const congestion: Congestion = {
    signature_loss_rate: 0.0061,
    classifier_metric: "complexity",
    metric_value: 0.3011,
    p_cpu: 0.998,
    action: "no_corrective_action",
    long_term_loss_rate: 0.00002,
    loss_count: "events",
    rate_mbit_s: 940.5,
  };
  const event: Record = {
    schema_version: "1.2",
    timestamp_ms: 1795219209100,
    source: "nowcast fobs",
    metric: "loss",
    status: "ok",
    value: 0.0123,
    unit: "fraction",
    to: "10.231.0.2:8070",
    seq: 17,
    probe: { transport: "fobs", payload_bytes: 1400 },
    congestion,
  };

  it("round-trips through the core's reader and writer", () => {
    const line = toLine(event);
    expect(line).toContain(
      '"congestion":{"signature_loss_rate":0.0061,"classifier_metric":"complexity",',
    );
    expect(parseRecord(line)).toEqual(event);
    // Without the optional members: the classifier switched off.
    const { metric_value: _m, p_cpu: _p, loss_count: _l, ...bare } = congestion;
    const off: Record = { ...event, congestion: { ...bare, classifier_metric: "off" } };
    expect(parseRecord(toLine(off))).toEqual(off);
    expect(toLine(off)).not.toContain("p_cpu");
  });

  const withCongestion = (c: object) => JSON.stringify({ ...event, congestion: c });
  it.each([
    [{ ...congestion, signature_loss_rate: 1.5 }, "congestion.signature_loss_rate", /fraction/],
    [{ ...congestion, p_cpu: -0.1 }, "congestion.p_cpu", /probability/],
    [{ ...congestion, p_cpu: null }, "congestion.p_cpu", /must not be null/],
    [{ ...congestion, long_term_loss_rate: 2 }, "congestion.long_term_loss_rate", /fraction/],
    [{ ...congestion, rate_mbit_s: -1 }, "congestion.rate_mbit_s", /outside/],
    [{ ...congestion, metric_value: "high" }, "congestion.metric_value", /must be a number/],
    [
      { ...congestion, loss_count: "bytes" },
      "congestion.loss_count",
      /'bytes' is not a loss count \(one of events, packets, transfer\)/,
    ],
    [
      { ...congestion, classifier_metric: "entropy" },
      "congestion.classifier_metric",
      /'entropy' is not a classifier metric/,
    ],
    [{ ...congestion, action: "slow_down" }, "congestion.action", /not a congestion action/],
    [{ ...congestion, action: undefined }, "congestion.action", /is required/],
    [[congestion], "congestion", /must be an object/],
  ])("%j → %s", (c, field, message) => {
    const e = refusal(withCongestion(c));
    expect(e.field).toBe(field);
    expect(e.message).toMatch(message);
    expect(() => toLine({ ...event, congestion: c as Congestion })).toThrow(field);
  });
});

describe("readNdjson", () => {
  it("skips blank lines and loses nothing for a bad line", () => {
    const text = `${goodLine}\nnot json\n\n${goodLine}\r\n{"schema_version":"9.1"}\n  [1,,2]\n`;
    const { records, errors } = readNdjson(text);
    expect(records.length).toBe(2);
    expect(errors.map((e) => e.line)).toEqual([2, 5, 6]);
    // Columns of the file's line, indent and all.
    expect(errors[0]!.message).toMatch(/ at column 2\)$/);
    expect(errors[2]!.message).toMatch(/^not valid JSON \([^()]* at column 6\)$/);
    expect(errors[0]).not.toHaveProperty("field");
    expect(errors[1]).toMatchObject({ field: "schema_version" });
    expect(errors[1]!.message).toContain("newer than this reader");
  });
});
