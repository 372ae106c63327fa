// The probe worker (JavaNws §2.1.1, the Communicator, and §2.1.2, the Forecaster): runs probe
// rounds every period, feeds each series' forecaster bank, and posts every measurement to the
// page. Off the main thread so that drawing never delays a timestamp.

import wasmUrl from "../../core/pkg/nowcast_core_bg.wasm?url";
import { ByteBudget, probeShare } from "./budget";
import { loadForecasting, type Series } from "./forecast";
import { importText } from "./files";
import { History, type StoredImport } from "./history";
import { httpDownloads, httpPing, RetryLater } from "./http-probe";
import {
  mirrorKey,
  type ImportedEvent,
  type MeasurementEvent,
  type MirrorSeries,
  type PageCommand,
  type SeriesKey,
  type StatusEvent,
  type WorkerEvent,
} from "./messages";
import type { Probe } from "./record";
import {
  aggregateRate,
  autoSize,
  chooseStreams,
  median,
  newStreamPlan,
  pretestBytes,
  pretestDue,
  PRETEST_PASSES,
  PRETEST_SHARE,
  retryAfterSeconds,
  splitBytes,
  STREAM_CANDIDATES,
  surprised,
  uploadRate,
  type StreamPlan,
  type StreamSpan,
  type TransferRate,
} from "./probe-math";
import { DEFAULT_SETTINGS, endpointName, type Settings } from "./settings";
import { BANDWIDTH_BOUNDS, predictability, RTT_BOUNDS, Tracker } from "./tracker";
import { ConnectionClosed, ProbeTimeout, WsConnection } from "./ws-probe";

const scope = globalThis as unknown as DedicatedWorkerGlobalScope;
/**
 * The base URL of the echo-node the site's series measure: this page's origin, or the target
 * chosen in the settings (applied between rounds, {@link applyTarget}).
 */
let origin = scope.location.origin;
/** The target's name in records (`to`) and in the history. */
let targetName = scope.location.host;
const MIB = 1024 * 1024;
/** Bytes an echo costs on the wire, both ways (type, seq, 2-byte payload, frame headers). */
const ECHO_BYTES = 2 * (7 + 6);
const PING_BYTES = 400;

let settings: Settings = { ...DEFAULT_SETTINGS };
let suspended = false;
let timer: ReturnType<typeof setTimeout> | undefined;
let cycleRunning = false;
let lastStart = -Infinity;
let backoffUntil = 0;
let conn: WsConnection | undefined;
/** The second connection, for echoes during transfers (loaded RTT). */
let loadConn: WsConnection | undefined;
/** The last RTT by WebSocket echo, for jitter. */
let lastRtt: number | undefined;
/** Gap between loaded-RTT echoes, so that they measure the queue without loading the server. */
const LOADED_ECHO_GAP_MS = 10;
let maxPayload = 64 * MIB;
let serverPerMinute = Infinity;
const budget = new ByteBudget(settings.budgetMiB * MIB);
const trackers = new Map<SeriesKey, Tracker>();
/** Imported series: their bank (no timeouts) and forecast errors, by key. */
const imported = new Map<string, { series: Series; errors: number[]; id: number | undefined }>();
/** The page shows at most this many refused lines of a file; the count says how many more. */
const MAX_REPORTED_ERRORS = 50;
/**
 * Values kept of one imported series: the newest ones. Replaying takes about 10 µs a value
 * (180 ms for 20,000 in Node on the test machine), and the graph shows the newest 10,000.
 */
const MAX_IMPORTED_POINTS = 20_000;
/** Imported series kept at once (each is a bank in memory and a copy in IndexedDB). */
const MAX_IMPORTED_SERIES = 20;
/** Imported series without an IndexedDB id (storage unavailable) are numbered from here. */
let unsavedImports = 0;
/** Imports and their restoring, one after another, so that the limits count what came before. */
let importing: Promise<void> = Promise.resolve();

/** Queues work on imported series after what is queued, starting between rounds. */
function queueImportWork(work: () => Promise<void>): void {
  importing = importing
    .then(betweenRounds)
    .then(work)
    .catch((e: unknown) => status("running", `import failed: ${(e as Error).message}`));
}
/** Waiting for the probe round that runs to end. */
const roundEnded: (() => void)[] = [];

/**
 * Resolves when no probe round is running. Replaying an import holds the worker for up to a
 * fraction of a second: between rounds, it cannot delay a probe's timestamp.
 */
function betweenRounds(): Promise<void> {
  return cycleRunning ? new Promise((resolve) => roundEnded.push(resolve)) : Promise.resolve();
}

let history: History | undefined;

/** Keeps a measurement in the history (its record's `to` says whose series it is). */
function keep(e: MeasurementEvent): void {
  history?.append(e.key, e.record).catch((err: unknown) => {
    // Storage can fill up or be revoked; measuring goes on without it.
    status("running", `history not saved: ${(err as Error).message}`);
    history = undefined;
  });
}

/**
 * Measurements (and mirror reports) made during a probe round, posted and kept when the round
 * ends: the page's drawing and IndexedDB's writes then never run beside a probe, where on a
 * small machine they take CPU that a browser's upload needs to keep its socket fed (100 Mbit/s
 * uploads on two streams dipped more often beside them). The page shows a round at its end.
 */
let held: WorkerEvent[] | undefined;

/** Posts an event to the page; a measurement is also kept in the history. During a round,
 *  events wait for its end ({@link release}). */
function post(e: WorkerEvent): void {
  if (held !== undefined && (e.type === "measurement" || e.type === "mirror")) {
    held.push(e);
    return;
  }
  scope.postMessage(e);
  if (e.type === "measurement") keep(e);
}

function release(): void {
  const events = held ?? [];
  held = undefined;
  for (const e of events) post(e);
}

/** Why the target cannot be reached at all, shown with every status until the target changes. */
let blockedNote = "";

function status(state: StatusEvent["state"], message: string): void {
  const now = performance.now();
  post({
    type: "status",
    state,
    message: [message, blockedNote].filter((m) => m !== "").join("; "),
    bytesThisHour: budget.used(now),
    bytesSinceStart: budget.usedSinceStart,
    budgetBytes: budget.perHour,
  });
}

function tracker(key: SeriesKey): Tracker {
  let t = trackers.get(key);
  if (t === undefined) {
    const rate = key.startsWith("bandwidth");
    t = new Tracker(
      key,
      rate ? "rate" : "duration",
      rate ? BANDWIDTH_BOUNDS : RTT_BOUNDS,
      "browser",
      targetName,
    );
    trackers.set(key, t);
  }
  return t;
}

/**
 * Runs one probe under its series' adaptive timeout; a timeout is recorded and fed back.
 * `t` and `report` default to the serving site's series; a mirror passes its own, so its
 * measurements stay out of the site's series and history.
 */
async function probe<T>(
  key: SeriesKey,
  payloadBytes: number,
  run: (timeoutMs: number) => Promise<T>,
  measured: (result: T, t: Tracker, timeoutMs: number) => void,
  probeInfo: () => Probe,
  t: Tracker = tracker(key),
  report: (e: MeasurementEvent) => void = post,
): Promise<void> {
  const timeoutMs = t.timeoutMs();
  budget.spend(payloadBytes, performance.now());
  try {
    measured(await run(timeoutMs), t, timeoutMs);
  } catch (e) {
    if (!(e instanceof ProbeTimeout)) throw e;
    report(
      t.timedOut(
        { timestampMs: Date.now(), durationMs: e.elapsedMs, timeoutMs, probe: probeInfo() },
        payloadBytes,
      ),
    );
  }
}

/**
 * Opens a probe connection. The first echo on a new connection pays for its warm-up (JavaNws
 * handshake), so it is kept out of the RTT series.
 */
async function openConnection(): Promise<WsConnection> {
  const c = await WsConnection.open(origin, RTT_BOUNDS.ceilingMs);
  maxPayload = Math.min(maxPayload, c.hello.maxPayload);
  budget.spend(ECHO_BYTES, performance.now());
  await c.echo(RTT_BOUNDS.ceilingMs);
  return c;
}

async function connection(): Promise<WsConnection> {
  if (!conn?.open) {
    lastRtt = undefined;
    conn = await openConnection();
  }
  return conn;
}

/**
 * Runs `transfer` while echoing on the second connection, one echo every
 * {@link LOADED_ECHO_GAP_MS}, for as long as it lasts: the median of the echoes sent before it
 * ended is one loaded RTT (the queueing the transfer causes). A timed-out echo is recorded as
 * a loaded-RTT timeout and ends the echoes.
 */
async function underLoad<T>(lc: WsConnection, transfer: Promise<T>, record = true): Promise<T> {
  let finished = false;
  const ended = transfer.finally(() => {
    finished = true;
  });
  const t = tracker("loaded_rtt/websocket");
  const timeoutMs = t.timeoutMs();
  const samples: number[] = [];
  const echoes = (async () => {
    while (!finished && lc.open) {
      budget.spend(ECHO_BYTES, performance.now());
      try {
        samples.push(await lc.echo(timeoutMs));
      } catch (e) {
        if (!(e instanceof ProbeTimeout) || !record) return;
        const probe = { transport: "websocket" as const, payload_bytes: 2 };
        const o = { timestampMs: Date.now(), durationMs: e.elapsedMs, timeoutMs, probe };
        post(t.timedOut(o, 2));
        return;
      }
      if (!finished) await new Promise((r) => setTimeout(r, LOADED_ECHO_GAP_MS));
    }
  })();
  try {
    return await ended;
  } finally {
    await echoes;
    const m = median(samples);
    if (m !== undefined && record) {
      const probe = { transport: "websocket" as const, payload_bytes: 2, raw_ms: m };
      post(t.measured(m, { timestampMs: Date.now(), durationMs: m, timeoutMs, probe }));
    }
  }
}

/** Jitter (issue 4): the absolute difference of consecutive echo RTTs, forecast like any series. */
function recordJitter(rtt: number, timeoutMs: number): void {
  if (lastRtt !== undefined) {
    const j = Math.abs(rtt - lastRtt);
    const probe = { transport: "websocket" as const, payload_bytes: 2 };
    post(
      tracker("jitter/websocket").measured(j, {
        timestampMs: Date.now(),
        durationMs: j,
        timeoutMs,
        probe,
      }),
    );
  }
  lastRtt = rtt;
}

/**
 * A WebSocket download as a bandwidth measurement: its rate with the predicted RTT subtracted
 * (JavaNws §2.1.1), the raw time kept in the record. Shared by this site's and the mirrors'.
 */
function wsDownloadMeasured(
  streams: readonly StreamSpan[],
  t: Tracker,
  timeoutMs: number,
  predictedRttMs: number | undefined,
): MeasurementEvent {
  const rate = aggregateRate(streams, predictedRttMs);
  return rateMeasured(rate, streams.length, "websocket", t, timeoutMs);
}

/**
 * A transfer's rate as a bandwidth measurement of `t`, with its streams, bytes and raw time
 * in the record; the series' stream plan learns whether it missed its forecast.
 */
function rateMeasured(
  rate: TransferRate,
  streams: number,
  transport: "websocket" | "http",
  t: Tracker,
  timeoutMs: number,
): MeasurementEvent {
  const e = t.measured(rate.mbits, {
    timestampMs: Date.now(),
    durationMs: rate.rawMs,
    timeoutMs,
    probe: {
      transport,
      payload_bytes: rate.bytes,
      streams,
      raw_ms: rate.rawMs,
      rtt_subtracted_ms: rate.rttSubtractedMs,
    },
  });
  const plan = planOf(t);
  plan.measurements = e.count;
  plan.surprised = surprised(rate.mbits, e.record.forecast);
  return e;
}

/** Each bandwidth series' stream count and pretest schedule, kept with its tracker, so a new
 *  target or a cleared history starts afresh. */
const streamPlans = new WeakMap<Tracker, StreamPlan>();

function planOf(t: Tracker): StreamPlan {
  let plan = streamPlans.get(t);
  if (plan === undefined) {
    plan = newStreamPlan();
    streamPlans.set(t, plan);
  }
  return plan;
}

/**
 * Runs one transfer of `bytes` split over `streams` WebSocket streams at once: the first on
 * `c`, the others on connections to `base` (the target's, or a mirror's) opened for it and
 * closed after it (a refused one leaves the transfer with fewer streams: the spans say how
 * many ran). A failed stream fails the transfer and closes `c`, whose exchange may still be
 * running.
 */
async function wsTransfer<T extends StreamSpan>(
  c: WsConnection,
  bytes: number,
  streams: number,
  run: (on: WsConnection, bytes: number) => Promise<T>,
  base: string = origin,
): Promise<T[]> {
  const opened = await Promise.allSettled(
    Array.from({ length: streams - 1 }, () => WsConnection.open(base, RTT_BOUNDS.ceilingMs)),
  );
  const extras = opened.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
  const on = [c, ...extras];
  try {
    return await Promise.all(splitBytes(bytes, on.length).map((b, i) => run(on[i]!, b)));
  } catch (e) {
    c.close();
    throw e;
  } finally {
    for (const x of extras) x.close();
  }
}

/**
 * The stream count for `key`'s probe this round. When a pretest is due ({@link pretestDue}),
 * runs {@link PRETEST_PASSES} transfers of {@link pretestBytes} for each of
 * {@link STREAM_CANDIDATES}, interleaved, and keeps the fewest streams whose slowest try
 * comes close to the fastest ({@link chooseStreams}). Pretest
 * transfers are charged to the byte budget (one that does not fit is not run) but are not
 * measurements of the series; a timed-out one ends the pretest with the rates it has.
 */
async function streamsFor(
  key: SeriesKey,
  size: number,
  rate: (bytes: number, streams: number, timeoutMs: number) => Promise<TransferRate>,
  t: Tracker = tracker(key),
  label: string = key,
): Promise<number> {
  const plan = planOf(t);
  if (plan.sincePretest !== undefined) plan.sincePretest++;
  if (!pretestDue(plan)) return plan.streams;
  const bytes = pretestBytes(size);
  const results: { streams: number; mbits: number }[] = [];
  tries: for (let pass = 0; pass < PRETEST_PASSES; pass++) {
    for (const streams of STREAM_CANDIDATES) {
      if (suspended || !budget.allows(bytes, performance.now())) break tries;
      budget.spend(bytes, performance.now());
      try {
        results.push({ streams, mbits: (await rate(bytes, streams, t.timeoutMs())).mbits });
      } catch (e) {
        // A timeout closed the connection: the tries left wait for the next pretest.
        if (!(e instanceof ProbeTimeout)) throw e;
        break tries;
      }
    }
  }
  if (results.length === 0) return plan.streams;
  plan.streams = chooseStreams(results);
  plan.sincePretest = 0;
  const figures = results.map((r) => `${r.streams}: ${r.mbits.toFixed(1)}`).join(", ");
  const note = `${label} pretest (streams: Mbit/s) ${figures} → ${plan.streams}`;
  console.info(`nowcast: ${note}`);
  status("running", note);
  return plan.streams;
}

function predicted(key: SeriesKey): number | undefined {
  return trackers.get(key)?.next()?.value;
}

/** Bandwidth probes in one round of the chosen transport(s), each series' pretests spread
 *  over the rounds between them. */
function bandwidthProbes(): number {
  const n = settings.transport === "both" ? 3 : settings.transport === "websocket" ? 2 : 1;
  return n * (1 + PRETEST_SHARE);
}

/** The chosen size, or the automatic one, which also keeps to its share of the budgets. */
function sizeFor(key: SeriesKey): number {
  if (settings.size !== "auto") return Math.min(settings.size, maxPayload);
  const share = probeShare(budget.perHour, settings.periodS, bandwidthProbes(), serverPerMinute);
  return autoSize(predicted(key), Math.min(maxPayload, share));
}

async function wsRound(): Promise<void> {
  const c = await connection();
  await probe(
    "rtt/websocket",
    ECHO_BYTES,
    (ms) => c.echo(ms),
    (rtt, t, timeoutMs) => {
      post(
        t.measured(rtt, {
          timestampMs: Date.now(),
          durationMs: rtt,
          timeoutMs,
          probe: { transport: "websocket", payload_bytes: 2, raw_ms: rtt },
        }),
      );
      recordJitter(rtt, timeoutMs);
    },
    () => ({ transport: "websocket", payload_bytes: 2 }),
  );
  if (suspended || !c.open) return;
  if (!loadConn?.open) loadConn = await openConnection();
  const lc = loadConn;
  const down = sizeFor("bandwidth_down/websocket");
  if (!budget.allows(down, performance.now())) return overBudget();
  const download = (bytes: number, streams: number, ms: number) =>
    wsTransfer(c, bytes, streams, (on, b) => on.download(b, ms));
  // Pretests run as the probes do, beside the loaded-RTT echoes (not recorded).
  const downStreams = await streamsFor("bandwidth_down/websocket", down, (bytes, n, ms) =>
    underLoad(lc, download(bytes, n, ms), false).then((s) =>
      aggregateRate(s, predicted("rtt/websocket")),
    ),
  );
  if (suspended || !c.open) return;
  await probe(
    "bandwidth_down/websocket",
    down,
    (ms) => underLoad(lc, download(down, downStreams, ms)),
    (r, t, timeoutMs) => post(wsDownloadMeasured(r, t, timeoutMs, predicted("rtt/websocket"))),
    () => ({ transport: "websocket", payload_bytes: down, streams: downStreams }),
  );
  if (suspended || !c.open) return;
  const up = sizeFor("bandwidth_up/websocket");
  if (!budget.allows(up, performance.now())) return overBudget();
  const upload = (bytes: number, streams: number, ms: number) =>
    wsTransfer(c, bytes, streams, (on, b) => on.upload(b, ms));
  const upStreams = await streamsFor("bandwidth_up/websocket", up, (bytes, n, ms) =>
    underLoad(lc, upload(bytes, n, ms), false).then((s) =>
      uploadRate(s, predicted("rtt/websocket")),
    ),
  );
  if (suspended || !c.open) return;
  await probe(
    "bandwidth_up/websocket",
    up,
    (ms) => underLoad(lc, upload(up, upStreams, ms)),
    (r, t, timeoutMs) =>
      post(
        rateMeasured(
          uploadRate(r, predicted("rtt/websocket")),
          r.length,
          "websocket",
          t,
          timeoutMs,
        ),
      ),
    () => ({ transport: "websocket", payload_bytes: up, streams: upStreams }),
  );
}

async function httpRound(): Promise<void> {
  await probe(
    "rtt/http",
    PING_BYTES,
    (ms) => httpPing(origin, ms),
    (rtt, t, timeoutMs) =>
      post(
        t.measured(rtt, {
          timestampMs: Date.now(),
          durationMs: rtt,
          timeoutMs,
          probe: { transport: "http", payload_bytes: 0, raw_ms: rtt },
        }),
      ),
    () => ({ transport: "http", payload_bytes: 0 }),
  );
  if (suspended) return;
  const down = sizeFor("bandwidth_down/http");
  if (!budget.allows(down, performance.now())) return overBudget();
  const download = (bytes: number, streams: number, ms: number) =>
    httpDownloads(origin, splitBytes(bytes, streams), ms);
  const streams = await streamsFor("bandwidth_down/http", down, (bytes, n, ms) =>
    download(bytes, n, ms).then((s) => aggregateRate(s, predicted("rtt/http"))),
  );
  if (suspended) return;
  await probe(
    "bandwidth_down/http",
    down,
    (ms) => download(down, streams, ms),
    (r, t, timeoutMs) =>
      post(rateMeasured(aggregateRate(r, predicted("rtt/http")), r.length, "http", t, timeoutMs)),
    () => ({ transport: "http", payload_bytes: down, streams }),
  );
}

/** A mirror the user opted in to: its own connection and series (RTT and download). */
interface Mirror {
  url: string;
  rtt: Tracker;
  down: Tracker;
  conn: WsConnection | undefined;
  last: Map<SeriesKey, MirrorSeries>;
  problem: string;
  /** Resolves once its series are rebuilt from the history (before its first round). */
  ready: Promise<void>;
}
const mirrors = new Map<string, Mirror>();
/** The mirrors the user opted in to (the page's last word), probed unless `clearing`. */
let wantedMirrors: readonly string[] = [];
/** Whether the history is being cleared. */
let clearing = false;
/** The mirror whose round is running: its forecasters are freed when the round ends. */
let mirrorInRound: Mirror | undefined;

function disposeMirror(m: Mirror): void {
  m.conn?.close();
  m.rtt.dispose();
  m.down.dispose();
}

/** A mirror series' summary: its last value and where its tracker stands. */
function mirrorSeries(
  last: number | null,
  s: Pick<MeasurementEvent, "next" | "count" | "timeouts">,
): MirrorSeries {
  return { last, next: s.next, count: s.count, timeouts: s.timeouts };
}

/**
 * Rebuilds a mirror's series from its saved records (the bank is deterministic) and shows
 * them, so that a reload, or ticking it again, goes on from where its graphs were.
 */
async function restoreMirror(m: Mirror): Promise<void> {
  const saved = await history?.load(m.rtt.to).catch(() => undefined);
  if (saved === undefined || mirrors.get(m.url) !== m) return;
  const series = [];
  for (const t of [m.rtt, m.down]) {
    const records = saved.get(t.key) ?? [];
    const last = records.at(-1);
    if (last === undefined) continue;
    t.restore(records);
    const state = t.state();
    m.last.set(t.key, mirrorSeries(last.value, state));
    series.push({ key: t.key, records, ...state });
  }
  if (series.length === 0) return;
  post({
    type: "mirror",
    url: m.url,
    rtt: m.last.get("rtt/websocket"),
    bandwidth: m.last.get("bandwidth_down/websocket"),
    measurements: [],
    history: series,
    problem: "",
  });
}

/**
 * One round against a mirror: a WebSocket echo (RTT) and a download, with the same probes and
 * timeouts as for the serving site. A failure is shown beside the mirror and never stops the
 * site's own measurements, nor those of the other mirrors.
 */
async function mirrorRound(m: Mirror): Promise<void> {
  await m.ready;
  if (mirrors.get(m.url) !== m) return;
  mirrorInRound = m;
  const measurements: MeasurementEvent[] = [];
  const report = (e: MeasurementEvent) => {
    m.last.set(e.key, mirrorSeries(e.record.value, e));
    measurements.push(e);
    // Not after the user unticked it, or cleared the history, while this round ran.
    if (mirrors.get(m.url) === m) keep(e);
  };
  try {
    if (!m.conn?.open) {
      m.conn = await WsConnection.open(m.url, RTT_BOUNDS.ceilingMs);
      // The first echo pays for the warm-up (as on the site's own connection): not an RTT.
      budget.spend(ECHO_BYTES, performance.now());
      await m.conn.echo(RTT_BOUNDS.ceilingMs);
    }
    const c = m.conn;
    await probe(
      "rtt/websocket",
      ECHO_BYTES,
      (ms) => c.echo(ms),
      (rtt, t, timeoutMs) =>
        report(
          t.measured(rtt, {
            timestampMs: Date.now(),
            durationMs: rtt,
            timeoutMs,
            probe: { transport: "websocket", payload_bytes: 2, raw_ms: rtt },
          }),
        ),
      () => ({ transport: "websocket", payload_bytes: 2 }),
      m.rtt,
      report,
    );
    if (suspended || !c.open) return;
    const cap = c.hello.maxPayload;
    const down =
      settings.size === "auto"
        ? autoSize(
            m.down.next()?.value,
            Math.min(
              cap,
              probeShare(budget.perHour, settings.periodS, 1 + PRETEST_SHARE, Infinity),
            ),
          )
        : Math.min(settings.size, cap);
    if (!budget.allows(down, performance.now())) return overBudget();
    // Parallel streams where one is not enough, chosen by the same pretests as the site's.
    const download = (bytes: number, streams: number, ms: number) =>
      wsTransfer(c, bytes, streams, (on, b) => on.download(b, ms), m.url);
    const streams = await streamsFor(
      "bandwidth_down/websocket",
      down,
      (bytes, n, ms) => download(bytes, n, ms).then((s) => aggregateRate(s, m.rtt.next()?.value)),
      m.down,
      `bandwidth_down/websocket of mirror ${m.url}`,
    );
    if (suspended || !c.open) return;
    await probe(
      "bandwidth_down/websocket",
      down,
      (ms) => download(down, streams, ms),
      (r, t, timeoutMs) => report(wsDownloadMeasured(r, t, timeoutMs, m.rtt.next()?.value)),
      () => ({ transport: "websocket", payload_bytes: down, streams }),
      m.down,
      report,
    );
    m.problem = "";
  } catch (e) {
    m.problem = (e as Error).message || (e as Error).name;
    m.conn?.close();
  } finally {
    mirrorInRound = undefined;
    // Posted only while still opted in: an answer after the user unticked it would bring it
    // back. Once unticked, its forecasters go now that no probe can still feed them.
    if (mirrors.get(m.url) !== m) {
      disposeMirror(m);
    } else {
      post({
        type: "mirror",
        url: m.url,
        rtt: m.last.get("rtt/websocket"),
        bandwidth: m.last.get("bandwidth_down/websocket"),
        measurements,
        problem: m.problem,
      });
    }
  }
}

/** Starts probing the mirrors in `urls` and stops (closes, forgets) the others. */
function setMirrors(urls: readonly string[]): void {
  for (const [url, m] of mirrors) {
    if (urls.includes(url)) continue;
    mirrors.delete(url);
    // A probe in flight still holds this mirror's forecasters: its round frees them.
    if (m === mirrorInRound) m.conn?.close();
    else disposeMirror(m);
  }
  for (const url of urls) {
    if (mirrors.has(url)) continue;
    // Named as a target is (records' `to`), so its history is the same whichever way it is
    // measured.
    const to = endpointName(url);
    const m: Mirror = {
      url,
      rtt: new Tracker("rtt/websocket", "duration", RTT_BOUNDS, "browser", to),
      down: new Tracker("bandwidth_down/websocket", "rate", BANDWIDTH_BOUNDS, "browser", to),
      conn: undefined,
      last: new Map(),
      problem: "",
      ready: Promise.resolve(),
    };
    mirrors.set(url, m);
    // A history that cannot be read leaves the mirror with new series, probed all the same.
    m.ready = restoreMirror(m).catch((e: unknown) => {
      m.problem = `history not restored: ${(e as Error).message}`;
    });
  }
}

function overBudget(): void {
  status("over-budget", "hourly byte budget reached: bandwidth probes wait");
}

async function round(): Promise<void> {
  await applyTarget();
  if (performance.now() < backoffUntil) {
    status("backing-off", "the server asked to wait");
    return;
  }
  status("running", "");
  try {
    if (settings.transport !== "http") await wsRound();
    if (!suspended && settings.transport !== "websocket") await httpRound();
  } catch (e) {
    const wait =
      e instanceof RetryLater
        ? e.seconds
        : e instanceof ConnectionClosed
          ? retryAfterSeconds(/retry-after/.test(e.reason) ? e.reason : null)
          : undefined;
    if (wait !== undefined) {
      backoffUntil = performance.now() + wait * 1000;
      status("backing-off", `${(e as Error).message}; waiting ${wait} s`);
    } else {
      status("running", (e as Error).message);
    }
  }
  // The mirrors after the site, one at a time, so their transfers never overlap its own. A
  // mirror that is the target is measured as the target (its series and history are the
  // same endpoint's), not twice.
  for (const m of [...mirrors.values()]) {
    if (suspended || performance.now() < backoffUntil) break;
    if (m.rtt.to === targetName) continue;
    await mirrorRound(m);
  }
}

function closeConnections(): void {
  conn?.close();
  loadConn?.close();
  for (const m of mirrors.values()) m.conn?.close();
}

/** Starts the next round one period after the last one started (at once if that has passed). */
function schedule(): void {
  clearTimeout(timer);
  timer = undefined;
  if (suspended || cycleRunning) return;
  const wait = Math.max(0, lastStart + settings.periodS * 1000 - performance.now());
  timer = setTimeout(() => {
    timer = undefined;
    cycleRunning = true;
    lastStart = performance.now();
    held = [];
    void round().finally(() => {
      release();
      cycleRunning = false;
      if (suspended) closeConnections();
      schedule();
      for (const resolve of roundEnded.splice(0)) resolve();
    });
  }, wait);
}

/** The target the site's series measure now; null until the page's first settings arrive. */
let appliedTarget: string | undefined | null = null;
/** The switch to the newest target: a round waits for it before its first probe. */
let targetSwitch: Promise<void> = Promise.resolve();

/**
 * Makes the settings' target the one measured, if it is not already. Called only between
 * rounds, so that no probe of one endpoint ever feeds another's series.
 */
function applyTarget(): Promise<void> {
  if (settings.target === appliedTarget) return targetSwitch;
  const target = settings.target;
  appliedTarget = target;
  targetSwitch = targetSwitch.then(() => switchTo(target));
  return targetSwitch;
}

/**
 * Measures `target` (undefined: the serving site) from now on: the old target's connections
 * close and its forecasters go; the new one's series are rebuilt from its saved records (the
 * bank is deterministic) and shown before its first new probe.
 */
async function switchTo(target: string | undefined): Promise<void> {
  conn?.close();
  loadConn?.close();
  conn = undefined;
  loadConn = undefined;
  lastRtt = undefined;
  for (const t of trackers.values()) t.dispose();
  trackers.clear();
  // A wait the old target asked for, or a block on reaching it, is not the new one's.
  backoffUntil = 0;
  blockedNote = "";
  origin = target ?? scope.location.origin;
  targetName = target === undefined ? scope.location.host : endpointName(target);
  const saved = await history?.load(targetName).catch(() => undefined);
  const series = [];
  for (const [key, records] of saved ?? []) {
    const t = tracker(key as SeriesKey);
    t.restore(records);
    series.push({ key: key as SeriesKey, records, ...t.state() });
  }
  post({ type: "history", to: targetName, series });
}

/** Opens the history; the series imported before the reload come back between rounds. */
async function openHistory(): Promise<void> {
  history = await History.open();
  queueImportWork(restoreImports);
}

/** Shows the series imported before the page was reloaded, one between rounds at a time. */
async function restoreImports(): Promise<void> {
  const stored = (await history?.imports().catch(() => undefined)) ?? [];
  for (const s of stored) {
    await betweenRounds();
    post({
      type: "imported",
      file: s.file,
      format: s.format,
      series: [replayImport(s, `import/${s.id}`)],
      errors: [],
      errorCount: 0,
      notes: [],
      restored: true,
    });
  }
}

const ready = Promise.all([
  loadForecasting(wasmUrl).then(openHistory),
  fetch("/api/config", { cache: "no-store" })
    .then(
      (r) =>
        r.json() as Promise<{ limits?: { maxPayloadBytes?: number; bytesPerMinute?: number } }>,
    )
    .then((c) => {
      maxPayload = c.limits?.maxPayloadBytes ?? maxPayload;
      serverPerMinute = c.limits?.bytesPerMinute ?? serverPerMinute;
    })
    .catch(() => undefined),
]);

/** Runs an imported series through the bank and keeps it under `key`; returns it as shown. */
function replayImport(s: StoredImport, key: string): ImportedEvent["series"][number] {
  const replayed = Tracker.replay(s.points);
  imported.set(key, { series: replayed.series, errors: replayed.errors, id: s.id });
  const summary = replayed.series.summary().mse_selected;
  return {
    key,
    label: s.label,
    unit: s.unit,
    points: replayed.points,
    mae: summary.n > 0 ? summary.mae : undefined,
  };
}

/**
 * Reads a file the user dropped or picked, forecasts its series with the same bank and stores
 * them, within the limits: at most {@link MAX_IMPORTED_SERIES} series kept, each trimmed to its
 * newest {@link MAX_IMPORTED_POINTS} values; the report says what was left out.
 */
async function importFile(file: string, text: string): Promise<void> {
  const r = importText(text, file);
  const notes: string[] = [];
  const room = Math.max(0, MAX_IMPORTED_SERIES - imported.size);
  if (r.series.length > room) {
    notes.push(
      `${r.series.length - room} series left out: at most ${MAX_IMPORTED_SERIES} imported ` +
        "series are kept at once; remove some to import more",
    );
  }
  const series = [];
  for (const s of r.series.slice(0, room)) {
    let points = s.points;
    if (points.length > MAX_IMPORTED_POINTS) {
      notes.push(
        `${s.label}: kept the newest ${MAX_IMPORTED_POINTS} of ${points.length} values ` +
          `(at most ${MAX_IMPORTED_POINTS} per series)`,
      );
      points = [...points].sort((a, b) => a.t - b.t).slice(-MAX_IMPORTED_POINTS);
    }
    const stored: StoredImport = {
      file,
      format: r.format,
      label: `${s.label} (${file})`,
      unit: s.unit,
      points,
    };
    try {
      stored.id = await history?.addImport(stored);
    } catch (e) {
      notes.push(`${s.label}: not kept for the next visit (${(e as Error).message})`);
    }
    if (history === undefined) {
      notes.push(`${s.label}: not kept for the next visit (no IndexedDB in this browser)`);
    }
    await betweenRounds();
    series.push(replayImport(stored, `import/${stored.id ?? `unsaved-${++unsavedImports}`}`));
  }
  post({
    type: "imported",
    file,
    format: r.format,
    series,
    errors: r.errors.slice(0, MAX_REPORTED_ERRORS),
    errorCount: r.errors.length,
    notes,
    restored: false,
  });
}

/** Forgets an imported series, here and in the history. */
function removeImport(key: string): void {
  const i = imported.get(key);
  if (i === undefined) return;
  imported.delete(key);
  i.series.dispose();
  if (i.id !== undefined) void history?.removeImport(i.id).catch(() => undefined);
  post({ type: "import-removed", key });
}

// A target or mirror the serving echo-node's Content-Security-Policy does not list (only its
// own mirrors are) cannot be reached; without this the user would only see probes time out.
scope.addEventListener("securitypolicyviolation", (e) => {
  const uri = (e as SecurityPolicyViolationEvent).blockedURI;
  const note =
    `this site's Content-Security-Policy does not allow connecting to ${uri} ` +
    "(only to itself and the mirrors its server lists)";
  try {
    if (new URL(uri).host === new URL(origin).host) blockedNote = note;
  } catch {
    // Not a URL: nothing to match against the target.
  }
  status("running", blockedNote === note ? "" : note);
});

scope.onmessage = (e: MessageEvent<PageCommand>) => {
  const cmd = e.data;
  void ready.then(() => {
    if (cmd.type === "import") {
      queueImportWork(() => importFile(cmd.file, cmd.text));
      return;
    }
    if (cmd.type === "remove-import") return removeImport(cmd.key);
    if (cmd.type === "clear") {
      for (const t of trackers.values()) t.dispose();
      trackers.clear();
      for (const i of imported.values()) i.series.dispose();
      imported.clear();
      // The mirrors stay opted in, with new series: those wanted once the history is empty
      // (the user may tick or untick one meanwhile).
      setMirrors([]);
      clearing = true;
      const cleared = () => {
        clearing = false;
        post({ type: "cleared" });
        setMirrors(wantedMirrors);
      };
      if (history === undefined) cleared();
      else void history.clear().then(cleared, cleared);
      return;
    }
    if (cmd.type === "predictability") {
      const t = trackers.get(cmd.key as SeriesKey);
      const i = imported.get(cmd.key);
      const m = [...mirrors.values()]
        .flatMap((m) => [m.rtt, m.down].map((t) => ({ t, key: mirrorKey(m.url, t.key) })))
        .find((s) => s.key === cmd.key);
      if (t !== undefined) post(t.predictability());
      else if (i !== undefined) post(predictability(cmd.key, i.series, i.errors));
      else if (m !== undefined) post({ ...m.t.predictability(), key: cmd.key });
      return;
    }
    if (cmd.type === "mirrors") {
      wantedMirrors = cmd.urls;
      // While the history is being cleared, none is probed (nor restored from what goes).
      if (!clearing) setMirrors(cmd.urls);
    } else if (cmd.type === "settings") {
      settings = cmd.settings;
      budget.perHour = settings.budgetMiB * MIB;
      if (settings.target !== appliedTarget) {
        // The new target's first round starts at once; a round on the wire ends first.
        lastStart = -Infinity;
        if (!cycleRunning) void applyTarget();
      }
    } else if (cmd.type === "suspend") {
      suspended = true;
      if (!cycleRunning) closeConnections();
      status("suspended", "");
    } else {
      suspended = false;
    }
    schedule();
  });
};
