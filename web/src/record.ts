// The measurement record: one JSON object per measurement, NDJSON files, the same format from
// the page and every native tool. The JSON Schema is public/schema/measurement-record.v1.schema.json.
// The types are here; the one reader is core/src/record.rs, which the page calls through
// WebAssembly (`parseRecord` and `readNdjson` of forecast.ts), so that every record the page
// takes in passes the CLI's rules. The writer below keeps record.rs's field order.

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
const CLASSIFIER_METRICS = ["complexity", "success_proportion", "none", "off"] as const;
const CONGESTION_ACTIONS = [
  "no_corrective_action",
  "rate_from_response",
  "already_answered",
] as const;
const LOSS_COUNTS = ["events", "packets", "transfer"] as const;

/** What was measured; the names are the same in Rust, the schema and the UI. */
export type Metric = (typeof METRICS)[number];
export type Unit = (typeof UNITS)[number];
export type Status = (typeof STATUSES)[number];
export type Transport = (typeof TRANSPORTS)[number];
export type Selector = (typeof SELECTORS)[number];
export type ClassifierMetric = (typeof CLASSIFIER_METRICS)[number];
export type CongestionAction = (typeof CONGESTION_ACTIONS)[number];
/** What FOBS's long-term loss rate counts: windows with loss (TFRC's loss events, the
 *  default) or lost packets (`--loss-rate packets`). */
export type LossCount = (typeof LOSS_COUNTS)[number];

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

/**
 * A FOBS congestion event (since 1.2): a window with loss, the loss classifier's reading of its
 * packet-loss signature and what the rate controller did. It rides on a `loss` record whose
 * value is the window's loss rate.
 */
export interface Congestion {
  /** The loss rate of the signature classified. */
  signature_loss_rate: number;
  /** "none": below the classifier's operating range; "off": the classifier was switched off. */
  classifier_metric: ClassifierMetric;
  /** The metric's value, when one was computed. */
  metric_value?: number;
  /** P(CPU contention), when the classifier ran. */
  p_cpu?: number;
  action: CongestionAction;
  /** The controller's long-term loss rate after the event. */
  long_term_loss_rate: number;
  /** What the long-term loss rate counts, when the controller keeps one; absent from records
   *  written before 2026-12-05 and under a fixed rate. */
  loss_count?: LossCount;
  /** The sending rate after the event, Mbit/s. */
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
  /** A FOBS congestion event (metric "loss"); since 1.2. */
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

/** A refused line of an NDJSON file (1-based line number). */
export interface LineError {
  line: number;
  field?: string;
  message: string;
}
