// The measurement record: one JSON object per measurement, NDJSON files, the same format from
// the page and every native tool. The JSON Schema is public/schema/measurement-record.v1.schema.json;
// this module is the page's reader and writer, written by hand because it ships in the page
// (no schema library in the bundle). It mirrors core/src/record.rs rule for rule, and
// both run against the shared examples in public/schema/examples.

/** The major version this build reads (any 1.x). */
export const MAJOR = 1;

const METRICS = [
  "rtt",
  "rtt_nagle",
  "handshake_rtt",
  "loaded_rtt",
  "jitter",
  "loss",
  "bandwidth_up",
  "bandwidth_down",
  "avail_bw_lower_bound",
  "throughput",
] as const;
const UNITS = ["ms", "Mbit/s", "fraction"] as const;
const STATUSES = ["ok", "timeout", "error"] as const;
const TRANSPORTS = ["websocket", "http", "tcp", "udp", "pcap", "fobs"] as const;
const SELECTORS = ["mse", "mae"] as const;

/** What was measured; the names are the same in Rust, the schema and the UI. */
export type Metric = (typeof METRICS)[number];
export type Unit = (typeof UNITS)[number];
export type Status = (typeof STATUSES)[number];
export type Transport = (typeof TRANSPORTS)[number];
export type Selector = (typeof SELECTORS)[number];

/** The unit a record of `metric` carries. */
function unitOf(metric: Metric): Unit {
  switch (metric) {
    case "loss":
      return "fraction";
    case "bandwidth_up":
    case "bandwidth_down":
    case "avail_bw_lower_bound":
    case "throughput":
      return "Mbit/s";
    default:
      return "ms";
  }
}

/** Probe parameters. */
export interface Probe {
  transport?: Transport;
  payload_bytes?: number;
  nagle?: boolean;
  streams?: number;
  sndbuf_bytes?: number;
  rcvbuf_bytes?: number;
  raw_ms?: number;
  rtt_subtracted_ms?: number;
}

/** The forecast made for a value before it was measured. */
export interface RecordForecast {
  value: number;
  /** Forecaster id, e.g. `median_31`. */
  method: string;
  selector: Selector;
  /** RMSE (selector mse) or MAE (selector mae) of the forecast so far. */
  error: number;
}

/** A FOBS congestion event (since 1.2): the classifier's reading of a window's loss. */
export interface Congestion {
  signature_loss_rate: number;
  classifier_metric: "complexity" | "success_proportion" | "none" | "off";
  metric_value?: number;
  p_cpu?: number;
  action: "no_corrective_action" | "rate_from_response" | "already_answered";
  long_term_loss_rate: number;
  rate_mbit_s: number;
}

/** One measurement. Optional fields that were absent or null in the input are left out. */
export interface Record {
  schema_version: string;
  timestamp_ms: number;
  source: string;
  metric: Metric;
  /** "ok" when the input has none. */
  status: Status;
  /** The measurement in `unit`; null unless status is ok. */
  value: number | null;
  unit: Unit;
  from?: string;
  to: string;
  seq?: number;
  /** The period of the series this probe belongs to (ms between probe starts); since 1.1. */
  period_ms?: number;
  timeout_ms?: number;
  error?: string;
  probe?: Probe;
  forecast?: RecordForecast;
  /** A FOBS congestion event; since 1.2. */
  congestion?: Congestion;
}

/** Why a record was refused: the field at fault as a dotted path, and what is wrong with it. */
export class RecordError extends Error {
  constructor(
    readonly field: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = "RecordError";
  }

  override toString(): string {
    return this.field === undefined ? this.message : `field '${this.field}': ${this.message}`;
  }
}

type Json = { [key: string]: unknown };
type Read<T> = (v: unknown, path: string) => T;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** How serde names an unexpected JSON value, so that both readers word errors alike. */
function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "sequence";
  switch (typeof v) {
    case "string":
      return `string ${JSON.stringify(v)}`;
    case "number":
      return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
    case "boolean":
      return `boolean \`${v}\``;
    default:
      return "map";
  }
}

const invalidType = (v: unknown, path: string, expected: string) =>
  new RecordError(path, `invalid type: ${describe(v)}, expected ${expected}`);

const string: Read<string> = (v, path) => {
  if (typeof v !== "string") throw invalidType(v, path, "a string");
  return v;
};

const number: Read<number> = (v, path) => {
  if (typeof v !== "number") throw invalidType(v, path, "f64");
  return v;
};

const boolean: Read<boolean> = (v, path) => {
  if (typeof v !== "boolean") throw invalidType(v, path, "a boolean");
  return v;
};

/** A non-negative integer below 2^bits; any JSON number with an integral value. */
function unsigned(bits: 32 | 64): Read<number> {
  return (v, path) => {
    if (typeof v !== "number") throw invalidType(v, path, `u${bits}`);
    if (!Number.isInteger(v) || v < 0 || v >= 2 ** bits) {
      throw new RecordError(path, `invalid value: ${v}, expected a non-negative integer in range`);
    }
    return v;
  };
}

function oneOf<T extends string>(variants: readonly T[]): Read<T> {
  return (v, path) => {
    if (typeof v !== "string") throw invalidType(v, path, "a string variant");
    if (!(variants as readonly string[]).includes(v)) {
      const expected = variants.map((x) => `\`${x}\``).join(", ");
      throw new RecordError(path, `unknown variant \`${v}\`, expected one of ${expected}`);
    }
    return v as T;
  };
}

const join = (prefix: string, key: string) => (prefix === "" ? key : `${prefix}.${key}`);

/** A field without a default: absent is reported later as missing, null is a type error. */
function field<T>(obj: Json, prefix: string, key: string, read: Read<T>): T | undefined {
  return Object.hasOwn(obj, key) ? read(obj[key], join(prefix, key)) : undefined;
}

/** An optional field: absent means none; null is refused (the schema has no null there). */
function optional<T>(obj: Json, prefix: string, key: string, read: Read<T>): T | undefined {
  const v = obj[key];
  if (v === null)
    throw new RecordError(join(prefix, key), "must not be null (leave the field out)");
  return v === undefined ? undefined : read(v, join(prefix, key));
}

/** The one field that may be null: a measurement's value when the probe did not succeed. */
function nullable<T>(obj: Json, key: string, read: Read<T>): T | undefined {
  const v = obj[key];
  return v === undefined || v === null ? undefined : read(v, key);
}

/** Limits on text fields, as in the schema. */
const MAX_LEN: [keyof Record, number][] = [
  ["source", 64],
  ["from", 512],
  ["to", 512],
  ["error", 1024],
];

function required<T>(v: T | undefined, path: string): T {
  if (v === undefined) throw new RecordError(path, "is required");
  return v;
}

/** Copies the defined properties of `o`, in its key order, so that absent fields stay absent. */
function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

// Fields are read in the order serde meets them: serde_json keeps an object's keys sorted, so
// of two wrong fields both readers name the alphabetically first; missing fields come after
// every present one was read, in declaration order.

const probe: Read<Probe> = (v, path) => {
  if (!isObject(v)) throw invalidType(v, path, "struct Probe");
  const nagle = optional(v, path, "nagle", boolean);
  const payload_bytes = optional(v, path, "payload_bytes", unsigned(64));
  const raw_ms = optional(v, path, "raw_ms", number);
  const rcvbuf_bytes = optional(v, path, "rcvbuf_bytes", unsigned(64));
  const rtt_subtracted_ms = optional(v, path, "rtt_subtracted_ms", number);
  const sndbuf_bytes = optional(v, path, "sndbuf_bytes", unsigned(64));
  const streams = optional(v, path, "streams", unsigned(32));
  const transport = optional(v, path, "transport", oneOf(TRANSPORTS));
  return defined({
    transport,
    payload_bytes,
    nagle,
    streams,
    sndbuf_bytes,
    rcvbuf_bytes,
    raw_ms,
    rtt_subtracted_ms,
  });
};

const forecast: Read<RecordForecast> = (v, path) => {
  if (!isObject(v)) throw invalidType(v, path, "struct RecordForecast");
  const error = field(v, path, "error", number);
  const method = field(v, path, "method", string);
  const selector = field(v, path, "selector", oneOf(SELECTORS));
  const value = field(v, path, "value", number);
  return {
    value: required(value, join(path, "value")),
    method: required(method, join(path, "method")),
    selector: required(selector, join(path, "selector")),
    error: required(error, join(path, "error")),
  };
};

const CLASSIFIER_METRICS = ["complexity", "success_proportion", "none", "off"] as const;
const ACTIONS = ["no_corrective_action", "rate_from_response", "already_answered"] as const;

const congestion: Read<Congestion> = (v, path) => {
  if (!isObject(v)) throw invalidType(v, path, "struct Congestion");
  const action = field(v, path, "action", oneOf(ACTIONS));
  const classifier_metric = field(v, path, "classifier_metric", oneOf(CLASSIFIER_METRICS));
  const long_term_loss_rate = field(v, path, "long_term_loss_rate", number);
  const metric_value = optional(v, path, "metric_value", number);
  const p_cpu = optional(v, path, "p_cpu", number);
  const rate_mbit_s = field(v, path, "rate_mbit_s", number);
  const signature_loss_rate = field(v, path, "signature_loss_rate", number);
  return defined({
    signature_loss_rate: required(signature_loss_rate, join(path, "signature_loss_rate")),
    classifier_metric: required(classifier_metric, join(path, "classifier_metric")),
    metric_value,
    p_cpu,
    action: required(action, join(path, "action")),
    long_term_loss_rate: required(long_term_loss_rate, join(path, "long_term_loss_rate")),
    rate_mbit_s: required(rate_mbit_s, join(path, "rate_mbit_s")),
  });
};

function fields(obj: Json): Record {
  const cg = optional(obj, "", "congestion", congestion);
  const error = optional(obj, "", "error", string);
  const fc = optional(obj, "", "forecast", forecast);
  const from = optional(obj, "", "from", string);
  const metric = field(obj, "", "metric", oneOf(METRICS));
  const pr = optional(obj, "", "probe", probe);
  const schema_version = field(obj, "", "schema_version", string);
  const seq = optional(obj, "", "seq", unsigned(64));
  const period_ms = optional(obj, "", "period_ms", number);
  const source = field(obj, "", "source", string);
  const status = field(obj, "", "status", oneOf(STATUSES));
  const timeout_ms = optional(obj, "", "timeout_ms", number);
  const timestamp_ms = field(obj, "", "timestamp_ms", number);
  const to = field(obj, "", "to", string);
  const unit = field(obj, "", "unit", oneOf(UNITS));
  const value = nullable(obj, "value", number);
  return defined({
    schema_version: required(schema_version, "schema_version"),
    timestamp_ms: required(timestamp_ms, "timestamp_ms"),
    source: required(source, "source"),
    metric: required(metric, "metric"),
    status: status ?? "ok",
    value: value ?? null,
    unit: required(unit, "unit"),
    from,
    to: required(to, "to"),
    seq,
    period_ms,
    timeout_ms,
    error,
    probe: pr,
    forecast: fc,
    congestion: cg,
  });
}

/** ASCII digits only (the schema's pattern), at most 2³² − 1. */
function parseU32(text: string): number | undefined {
  if (!/^[0-9]+$/.test(text)) return undefined;
  const v = Number(text);
  return v < 2 ** 32 ? v : undefined;
}

/** Any 1.x is read (fields of later minors are ignored); a newer major is refused. */
function checkVersion(obj: Json): void {
  if (!Object.hasOwn(obj, "schema_version")) {
    throw new RecordError("schema_version", "is required");
  }
  const text = obj.schema_version;
  if (typeof text !== "string") {
    throw new RecordError("schema_version", 'must be a string such as "1.0"');
  }
  const dot = text.indexOf(".");
  const majorText = text.slice(0, dot);
  const leadingZero = majorText.length > 1 && majorText.startsWith("0");
  const major = dot < 0 || leadingZero ? undefined : parseU32(majorText);
  const minor = dot < 0 ? undefined : parseU32(text.slice(dot + 1));
  if (major === undefined || minor === undefined) {
    throw new RecordError("schema_version", `'${text}' is not MAJOR.MINOR`);
  }
  if (major > MAJOR) {
    throw new RecordError(
      "schema_version",
      `version ${text} is newer than this reader supports (${MAJOR}.x); update Nowcast to read it`,
    );
  }
  if (major < MAJOR) {
    throw new RecordError("schema_version", `version ${text} is not a known version`);
  }
}

/** The rules a schema-shaped record must also follow, in record.rs's order. */
function validate(r: Record): void {
  const fail = (field: string, message: string) => new RecordError(field, message);
  if (r.probe?.streams === 0) throw fail("probe.streams", "must be at least 1");
  if (!(r.timestamp_ms >= 0)) throw fail("timestamp_ms", "must be milliseconds since 1970 (≥ 0)");
  if (r.source === "") throw fail("source", "must not be empty");
  if (r.to === "") throw fail("to", "must not be empty");
  const unit = unitOf(r.metric);
  if (r.unit !== unit) throw fail("unit", `${r.metric} is measured in ${unit}, not ${r.unit}`);
  if (r.status === "ok" && r.value === null) throw fail("value", "is required when status is ok");
  if (r.metric === "loss" && r.value !== null && !(r.value >= 0 && r.value <= 1)) {
    throw fail("value", "loss is a fraction between 0 and 1");
  }
  if (r.status === "timeout" && r.timeout_ms === undefined) {
    throw fail("timeout_ms", "is required when status is timeout");
  }
  if (r.period_ms !== undefined && !(r.period_ms > 0)) {
    throw fail("period_ms", "must be a positive number");
  }
  if (r.timeout_ms !== undefined && !(r.timeout_ms > 0)) {
    throw fail("timeout_ms", "must be a positive number");
  }
  const c = r.congestion;
  if (c !== undefined) {
    const fraction = (v: number) => Number.isFinite(v) && v >= 0 && v <= 1;
    if (!fraction(c.signature_loss_rate)) {
      throw fail("congestion.signature_loss_rate", "is a fraction between 0 and 1");
    }
    if (c.p_cpu !== undefined && !fraction(c.p_cpu)) {
      throw fail("congestion.p_cpu", "is a probability between 0 and 1");
    }
    if (!fraction(c.long_term_loss_rate)) {
      throw fail("congestion.long_term_loss_rate", "is a fraction between 0 and 1");
    }
    if (!(Number.isFinite(c.rate_mbit_s) && c.rate_mbit_s >= 0)) {
      throw fail("congestion.rate_mbit_s", "must be a non-negative number");
    }
    if (c.metric_value !== undefined && !Number.isFinite(c.metric_value)) {
      throw fail("congestion.metric_value", "must be a finite number");
    }
  }
  if (r.forecast !== undefined && !(r.forecast.error >= 0)) {
    throw fail("forecast.error", "must be a non-negative number");
  }
}

/**
 * JSON text to a value. Numbers beyond the double range parse to ±Infinity in JavaScript
 * but are a JSON error for serde_json, so they are refused here as well.
 */
function parseJson(line: string): unknown {
  try {
    return JSON.parse(line, (_key, v: unknown) => {
      if (typeof v === "number" && !Number.isFinite(v))
        throw new SyntaxError("number out of range");
      return v;
    });
  } catch (e) {
    throw new RecordError(undefined, `not valid JSON (${(e as Error).message})`);
  }
}

/** Parses and validates one NDJSON line; throws a {@link RecordError}. */
export function parseRecord(line: string): Record {
  const raw = parseJson(line);
  if (!isObject(raw)) throw new RecordError(undefined, "a record must be a JSON object");
  checkVersion(raw);
  for (const [key, max] of MAX_LEN) {
    const text = raw[key];
    if (typeof text === "string" && [...text].length > max) {
      throw new RecordError(key, `is longer than ${max} characters`);
    }
  }
  const record = fields(raw);
  validate(record);
  return record;
}

/** A refused line of an NDJSON file (1-based line number). */
export interface LineError {
  line: number;
  field?: string;
  message: string;
}

/**
 * Reads NDJSON text: every valid record, and every refused line with its reason. Blank lines
 * are skipped; one bad line loses nothing else.
 */
export function readNdjson(text: string): { records: Record[]; errors: LineError[] } {
  const records: Record[] = [];
  const errors: LineError[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") return;
    try {
      records.push(parseRecord(line));
    } catch (e) {
      if (!(e instanceof RecordError)) throw e;
      errors.push(defined({ line: i + 1, field: e.field, message: e.message }));
    }
  });
  return { records, errors };
}

/**
 * The record as one NDJSON line (without the newline), fields in record.rs's order; absent
 * optional fields are left out, as JSON.stringify does with undefined properties.
 */
export function toLine(record: Record): string {
  const { probe: p, forecast: f, congestion: c } = record;
  return JSON.stringify({
    schema_version: record.schema_version,
    timestamp_ms: record.timestamp_ms,
    source: record.source,
    metric: record.metric,
    status: record.status,
    value: record.value,
    unit: record.unit,
    from: record.from,
    to: record.to,
    seq: record.seq,
    period_ms: record.period_ms,
    timeout_ms: record.timeout_ms,
    error: record.error,
    probe: p && {
      transport: p.transport,
      payload_bytes: p.payload_bytes,
      nagle: p.nagle,
      streams: p.streams,
      sndbuf_bytes: p.sndbuf_bytes,
      rcvbuf_bytes: p.rcvbuf_bytes,
      raw_ms: p.raw_ms,
      rtt_subtracted_ms: p.rtt_subtracted_ms,
    },
    forecast: f && { value: f.value, method: f.method, selector: f.selector, error: f.error },
    congestion: c && {
      signature_loss_rate: c.signature_loss_rate,
      classifier_metric: c.classifier_metric,
      metric_value: c.metric_value,
      p_cpu: c.p_cpu,
      action: c.action,
      long_term_loss_rate: c.long_term_loss_rate,
      rate_mbit_s: c.rate_mbit_s,
    },
  });
}
