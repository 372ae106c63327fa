// The round: one loop that runs the sites' plans (plan.ts), the same for the target and every
// mirror. Each step runs under its series' adaptive timeout (Allen, Wolski & Plank: forecast
// + k·error); a probe that times out is recorded and fed back, never dropped (JavaNws §2.1.1),
// and one that fails is recorded with its reason; every measurement leaves the round as a
// record, through `env.record`.

import type { ProbedSeries, ProbedState, ProbeObservation } from "../forecast";
import type { MeasurementEvent, SeriesKey } from "../messages";
import type { Record } from "../record";
import type { ByteBudget } from "./budget";
import { probeShare } from "./budget";
import { backoffSeconds, failureReason, ProbeTimeout } from "./errors";
import type { Jitter } from "./measure/jitter";
import type { Link, Measurement, Measurements, Sample } from "./measure/measurement";
import { streamCount, type PretestResult } from "./measure/pretest";
import { isTransfer, type Plan, type Step, type StepTransport } from "./plan";
import {
  autoMinBytes,
  autoSize,
  bandwidthDue,
  bandwidthEvery,
  budgetProbeCap,
  burstNext,
  median,
  PRETEST_SHARE,
  surprised,
  timedBytes,
} from "./probe-math";
import { measurement, type SeriesSet } from "./series";

/** What a round needs of a site. */
export interface RoundSite {
  readonly series: SeriesSet;
  readonly link: Link;
  readonly jitter: Jitter;
  /** A site that went (unticked, another target, history cleared) runs no more steps. */
  readonly retired?: boolean;
}

/** What a round needs of the engine around it. */
export interface RoundEnv {
  readonly budget: ByteBudget;
  /** Seconds between rounds: each record's `period_ms`, and the automatic size's share of
   *  the hourly budget. */
  readonly periodS: number;
  /** The largest payload one probe may carry and the server's bytes per minute, for the
   *  size rule; read when a transfer is sized (a connection's HELLO may have lowered them). */
  limits(): { maxPayload: number; perMinute: number };
  /** Wall-clock ms, for the budget (kept across reloads). */
  now(): number;
  /** Wall-clock ms, for records. */
  wallClock(): number;
  suspended(): boolean;
  /** A measurement of the site, timed out, failed or not, once kept in the site's store. */
  record(e: MeasurementEvent): void;
  /** A transfer of `bytes` did not fit in the hour's budget: its transport's other steps
   *  wait. */
  overBudget(bytes: number): void;
  /** An automatically sized bandwidth series `key` is probed as its size and the budget's
   *  share set it this round ({@link Spacing}). */
  spaced(key: SeriesKey, spacing: Spacing): void;
  /** A first-run burst is about to start: what the round measured so far may be shown now
   *  rather than after the burst (the page's first figures should not wait for it). */
  bursting(): void;
  /** A stream-count pretest ran for `key`. */
  pretested(key: SeriesKey, results: readonly PretestResult[], streams: number): void;
}

/** How often an automatically sized bandwidth series is probed, and what limits it. */
export interface Spacing {
  /** Every how many rounds (1: each round). */
  every: number;
  /** The period (s) `every` was worked out for: the schedule in seconds is `every` of them
   *  until a round at a new period works it out again (probe-math.ts `bandwidthDue`). */
  periodS: number;
  /** What spaces it beyond the period, or keeps its probes shorter than they should last
   *  (`capped`): the hourly budget or the server's allowance; undefined when nothing does. */
  limit: "budget" | "server" | undefined;
  /** Whether the budget kept the probe smaller than the size the rate asks for
   *  (probe-math.ts `budgetProbeCap`). */
  capped: boolean;
}

/** How a site's part of a round went. */
export interface SiteReport {
  /** Steps the site answered: a value, or a timeout (it was reached, if slowly). */
  answered: number;
  /** Steps recorded as failed (no connection, refused, cut off). */
  failed: number;
  /** Why the first failure happened, when one did. */
  problem: string | undefined;
  /** Seconds the site asked the page to wait (HTTP 429, a close over a limit), when it did:
   *  its steps stopped there. */
  waitS: number | undefined;
}

/** One site's plan in a round over several sites. */
export interface SitePart {
  site: RoundSite;
  plan: Plan;
  env: RoundEnv;
}

/**
 * Runs `plan` against `site`, step by step (see {@link SiteRound}): every step leaves a
 * record (a value, a timeout or a failure) unless the budget or a timed-out connection holds
 * its transport back, or the round is suspended.
 */
export async function runRound(
  site: RoundSite,
  plan: Plan,
  env: RoundEnv,
  measurements: Measurements,
): Promise<SiteReport> {
  return (await runSites([{ site, plan, env }], measurements))[0]!;
}

/**
 * One round over several sites, fairly: the ranking's steps (plan.ts `rankingSteps`) phase
 * by phase, every site's echo back to back and then every site's download, the sites' order
 * turned by `turn` each round (none is always first, just after the previous round's work);
 * then each site's other steps. A site's failure is its own: the others go on. The automatic
 * size shares the budget among every transfer of the round.
 */
export async function runSites(
  parts: readonly SitePart[],
  measurements: Measurements,
  turn = 0,
): Promise<SiteReport[]> {
  const transfers = parts.reduce((n, p) => n + p.plan.filter(isTransfer).length, 0);
  const rounds = parts.map((p) => new SiteRound(p.site, p.env, measurements, transfers));
  const order: [number, Step][] = [];
  const n = parts.length;
  const phases = Math.max(0, ...parts.flatMap((p) => p.plan.map((s) => (s.ranking ?? -1) + 1)));
  for (let phase = 0; phase < phases; phase++) {
    for (let k = 0; k < n; k++) {
      const i = (k + turn) % n;
      for (const step of parts[i]!.plan) if (step.ranking === phase) order.push([i, step]);
    }
  }
  parts.forEach((p, i) => {
    for (const step of p.plan) if (step.ranking === undefined) order.push([i, step]);
  });
  for (const [i, step] of order) {
    if (parts[i]!.env.suspended()) break;
    await rounds[i]!.step(step);
  }
  return rounds.map((r) => r.report);
}

/**
 * One site's steps in a round. A transport's connection is opened when the round first needs
 * it; one that closes during the round (a probe that timed out closes it) ends that
 * transport's steps, as does a transfer that does not fit in the budget. A failure (the
 * connection cannot be opened, the server refuses or cuts it) is a record of its step, and
 * of each of the transport's steps after it, with the reason: an outage is data, not a gap.
 */
export class SiteRound {
  readonly report: SiteReport = { answered: 0, failed: 0, problem: undefined, waitS: undefined };
  private readonly run: Run;
  private readonly begun = new Set<StepTransport>();
  /** Transports whose remaining steps are skipped, with the failure that stopped them
   *  (recorded for each step), or undefined (held back, nothing to record). */
  private readonly stopped = new Map<StepTransport, string | undefined>();

  constructor(
    private readonly site: RoundSite,
    private readonly env: RoundEnv,
    measurements: Measurements,
    transfers: number,
  ) {
    this.run = new Run(site, env, measurements, transfers);
  }

  async step(step: Step): Promise<void> {
    const { site } = this;
    if (site.retired === true || this.report.waitS !== undefined) return;
    if (this.stopped.has(step.transport)) {
      const reason = this.stopped.get(step.transport);
      if (reason !== undefined) this.failed(step, reason);
      return;
    }
    try {
      if (!this.begun.has(step.transport)) {
        this.begun.add(step.transport);
        if (await site.link.connect(step.transport)) site.jitter.reset();
      } else if (!site.link.connected(step.transport)) {
        this.stopped.set(step.transport, undefined);
        return;
      }
      const outcome = isTransfer(step) ? await this.run.transfer(step) : await this.run.rtt(step);
      if (outcome === "held") this.stopped.set(step.transport, undefined);
      else if (outcome === "answered") this.report.answered++;
    } catch (e) {
      const wait = backoffSeconds(e);
      const reason = wait === undefined ? failureReason(e) : `the server asked to wait ${wait} s`;
      this.failed(step, reason);
      this.stopped.set(step.transport, reason);
      if (wait !== undefined) this.report.waitS = wait;
    }
  }

  /** Records `step` as failed for `reason`. */
  private failed(step: Step, reason: string): void {
    this.report.failed++;
    this.report.problem ??= reason;
    this.run.failed(step, reason);
  }
}

/** What a step came to: a value or a timeout ("answered"), held back (the budget, a closed
 *  connection) with nothing to record, or not due this round (a bandwidth probe spaced by the
 *  budget, probe-math.ts `bandwidthEvery`). */
type Outcome = "answered" | "held" | "skipped";

/** One round's steps against one site. */
class Run {
  private readonly periodMs: number;
  /** Whether the second connection was opened (or found open) this round: like the first,
   *  once a round. */
  private loadBegun = false;
  /** Whether it is open, so that transfers have loaded-RTT echoes beside them. */
  private loadOpen = false;

  constructor(
    private readonly site: RoundSite,
    private readonly env: RoundEnv,
    private readonly measurements: Measurements,
    /** Transfers in the plan: each round's share of the budget is split among them. */
    private readonly transfers: number,
  ) {
    this.periodMs = env.periodS * 1000;
  }

  private measurement(step: Step): Measurement {
    const m = this.measurements[`${step.measure}/${step.transport}`];
    if (m === undefined) throw new Error(`no ${step.measure} measurement over ${step.transport}`);
    return m;
  }

  /** The series of `key`, which writes the period it is probed at into its records: this
   *  round's, or a bandwidth series' spacing ({@link Run.transfer}). */
  private series(key: SeriesKey, periodMs = this.periodMs): ProbedSeries {
    const s = this.site.series.get(key);
    s.setPeriodMs(periodMs);
    return s;
  }

  /** A probe its series recorded: kept in its site's store (what the history, the export and
   *  a restore read), then handed on. */
  private record(
    key: SeriesKey,
    observed: { record: Record; state: ProbedState },
  ): MeasurementEvent {
    const e = measurement(key, observed);
    this.site.series.keep(key, e.record);
    this.env.record(e);
    return e;
  }

  /**
   * Runs one probe of `step` under its series' timeout, charging `m.cost(bytes)` to the
   * budget, and records it: its sample, or its timeout (the series feeds a timeout back, and
   * counts a probe that completed after its timeout as one). Undefined when it timed out.
   */
  private async probe(
    step: Step,
    m: Measurement,
    bytes: number,
    streams: number,
    run: (timeoutMs: number) => Promise<Sample>,
    periodMs = this.periodMs,
  ): Promise<{ sample: Sample; event: MeasurementEvent } | undefined> {
    const s = this.series(step.key, periodMs);
    // A probed step's series times its probes (only a statistic has no timeout of its own).
    const timeoutMs = s.timeoutMs()!;
    this.env.budget.spend(m.cost(bytes), this.env.now());
    try {
      const sample = await run(timeoutMs);
      const { value, durationMs, probe } = sample;
      const at = this.env.wallClock();
      const o: ProbeObservation = {
        timestampMs: at,
        status: "ok",
        value,
        durationMs,
        timeoutMs,
        probe,
      };
      return { sample, event: this.record(step.key, s.observe(o)) };
    } catch (e) {
      if (!(e instanceof ProbeTimeout)) throw e;
      // Its payload is what a timed-out rate feeds back.
      const probe = m.probe(bytes, streams);
      const at = this.env.wallClock();
      const o: ProbeObservation = {
        timestampMs: at,
        status: "timeout",
        durationMs: e.elapsedMs,
        timeoutMs,
        probe,
      };
      this.record(step.key, s.observe(o));
      return undefined;
    }
  }

  /** Records that `step` could not run, for `reason`: its series keeps the failure (which
   *  teaches its forecasters nothing). */
  failed(step: Step, reason: string): void {
    this.record(
      step.key,
      this.series(step.key).observe({
        timestampMs: this.env.wallClock(),
        status: "error",
        error: reason,
        probe: { transport: step.transport },
      }),
    );
  }

  /** An RTT probe, and the jitter it makes with the one before. Always goes on. */
  async rtt(step: Step): Promise<Outcome> {
    const m = this.measurement(step);
    // Its own forecast: how many pings a probe sends depends on it (measure/echo.ts).
    const predictedRttMs = this.site.series.next(step.key)?.value;
    const request = { bytes: 0, streams: 1, predictedRttMs };
    const r = await this.probe(step, m, 0, 1, (timeoutMs) =>
      m.run(this.site.link, { ...request, timeoutMs }),
    );
    if (step.jitter === undefined || r === undefined) return "answered";
    const j = this.site.jitter.next(r.sample.value);
    if (j !== undefined) {
      const { transport, payload_bytes } = r.sample.probe;
      // A statistic of the echoes: no duration of its own, the echo's timeout.
      this.record(
        step.jitter,
        this.series(step.jitter).observe({
          timestampMs: this.env.wallClock(),
          status: "ok",
          value: j,
          timeoutMs: r.event.record.timeout_ms,
          probe: { transport, payload_bytes },
        }),
      );
    }
    return "answered";
  }

  /**
   * The step's size and how many rounds apart its probes go: as chosen, every round; or
   * automatic (probe-math.ts `autoSize`: the predicted rate for {@link autoTargetMs}, within
   * the server's cap), spaced ⌈size / share⌉ rounds apart (`bandwidthEvery`) when one round's
   * share of the hourly budget and of the server's allowance cannot afford it, so that every
   * probe lasts long enough to be timed. `rate` is a rate just read (the burst's), else the
   * series' forecast sizes it.
   */
  private size(step: Step, rate?: number): { bytes: number } & Spacing {
    const { maxPayload, perMinute } = this.env.limits();
    const size = step.size ?? "auto";
    if (size !== "auto") {
      return {
        bytes: Math.min(size, maxPayload),
        every: 1,
        periodS: this.env.periodS,
        limit: undefined,
        capped: false,
      };
    }
    const probes = this.transfers * (1 + PRETEST_SHARE);
    const share = probeShare(this.env.budget.perHour, this.env.periodS, probes, perMinute);
    const forRate = rate ?? this.sizingRate(step);
    const wanted = autoSize(forRate, maxPayload, this.predictedRtt(step));
    const cap = budgetProbeCap(this.env.budget.perHour, this.transfers);
    const bytes = autoSize(forRate, Math.min(maxPayload, cap), this.predictedRtt(step));
    const capped = bytes < wanted;
    const every = bandwidthEvery(bytes, share.bytes);
    const limit = every > 1 || capped ? share.limit : undefined;
    return { bytes, every, periodS: this.env.periodS, limit, capped };
  }

  /**
   * The rate an automatic size is made for: the series' forecast, or the last measurement when
   * that fell far below it (it missed by more than PRETEST_SURPRISE errors). The forecasters
   * follow a step down only after a value or two, and until then a probe sized for the old
   * rate runs for seconds: on a link that fell from 200 to 40 Mbit/s, each 8 MiB probe took
   * 1.75 s, and the pretest the surprise calls for (six tries of half a probe) 5 s each way,
   * in which the site's other series went unmeasured. A probe sized from an outlier that read
   * half the rate still lasts half the target (and, on a long path, a round trip: the core's
   * `transfer::RTT_TIMES`), long enough to be timed, so it reads the rate and the sizes cannot
   * shrink step by step.
   */
  private sizingRate(step: Step): number | undefined {
    const { series } = this.site;
    const forecast = series.next(step.key)?.value;
    if (!series.streams(step.key).surprised) return forecast;
    const records = series.records(step.key);
    for (let i = records.length - 1; i >= 0; i--) {
      const last = records[i]!;
      if (last.status !== "ok") continue;
      return last.value !== null && forecast !== undefined && last.value < forecast
        ? last.value
        : forecast;
    }
    return forecast;
  }

  /** The RTT a transfer of `step` has taken off its time: its transport's own RTT forecast,
   *  else the other's (the same path: a plan over WebSocket has no fetch ping, yet its
   *  transfers go over fetch). */
  private predictedRtt(step: Step): number | undefined {
    const { series } = this.site;
    return (
      series.next(`rtt/${step.transport}`) ??
      series.next(step.transport === "http" ? "rtt/websocket" : "rtt/http")
    )?.value;
  }

  /**
   * The first-run burst of an automatically sized step: tries of growing size (from 64 KiB,
   * `burstNext`: ×4 or the automatic size of the rate read, up to the server's cap) until one
   * lasts {@link autoTargetMs}, so that the first recorded probe is long enough to be timed
   * rather than the series creeping up from 64 KiB over many short, low-reading probes. The
   * tries are not recorded (like the stream-count pretest's: a try too short to be timed is
   * a sizing step, not a measurement); they are charged to the budget, and the burst stops
   * after {@link BURST_BUDGET_SHARE} of the hour's budget (shared among the round's
   * transfers), when the budget refuses the next try, or when a try times out. Returns the
   * rate the last try read, undefined when none did.
   */
  private async burst(step: Step, m: Measurement, streams: number): Promise<number | undefined> {
    const { env } = this;
    const { maxPayload } = env.limits();
    const allowed = budgetProbeCap(env.budget.perHour, this.transfers);
    let spent = 0;
    let bytes: number | undefined = Math.min(autoMinBytes(), maxPayload);
    let rate: number | undefined;
    while (bytes !== undefined) {
      const cost = m.cost(bytes);
      if (env.suspended() || spent + cost > allowed || !env.budget.allows(cost, env.now())) break;
      env.budget.spend(cost, env.now());
      spent += cost;
      const timeoutMs = this.site.series.get(step.key).timeoutMs()!;
      let sample: Sample;
      try {
        sample = await this.runTransfer(step, m, { bytes, streams, timeoutMs }, false);
      } catch (e) {
        if (e instanceof ProbeTimeout) break;
        throw e;
      }
      rate = sample.value;
      bytes = burstNext(
        bytes,
        sample.value,
        sample.durationMs,
        maxPayload,
        this.predictedRtt(step),
      );
    }
    return rate;
  }

  /**
   * Runs `m` once; for a step with loaded latency, beside echoes on the second connection,
   * which are recorded in their series when `recordLoad` (not during pretests).
   */
  private async runTransfer(
    step: Step,
    m: Measurement,
    r: { bytes: number; streams: number; timeoutMs: number },
    recordLoad: boolean,
  ): Promise<Sample> {
    const { site, env } = this;
    const predictedRttMs = this.predictedRtt(step);
    const work = m.run(site.link, { ...r, predictedRttMs });
    if (step.loaded === undefined || !this.loadOpen) return work;
    const loaded = this.series(step.loaded);
    const timeoutMs = loaded.timeoutMs()!;
    const spend = (bytes: number) => env.budget.spend(bytes, env.now());
    const done = await this.measurements.loaded.during(site.link, work, timeoutMs, spend);
    if (recordLoad) {
      const probe = { transport: "websocket" as const, payload_bytes: 2 };
      const { timedOut, samples } = done.echoes;
      if (timedOut !== undefined) {
        const { atMs, elapsedMs } = timedOut;
        const o: ProbeObservation = {
          timestampMs: atMs,
          status: "timeout",
          durationMs: elapsedMs,
          timeoutMs,
          probe,
        };
        this.record(step.loaded, loaded.observe(o));
      }
      const mid = median(samples);
      if (mid !== undefined) {
        this.record(
          step.loaded,
          loaded.observe({
            timestampMs: env.wallClock(),
            status: "ok",
            value: mid,
            durationMs: mid,
            timeoutMs,
            probe: { ...probe, raw_ms: mid },
          }),
        );
      }
    }
    if (done.work.status === "rejected") throw done.work.reason;
    return done.work.value;
  }

  /**
   * A bandwidth probe: sized, checked against the budget, its stream count found (by the
   * pretest when one is due), then run and recorded; the series' stream plan learns whether
   * it missed its forecast. "held" when the transport's other steps should wait.
   */
  async transfer(step: Step): Promise<Outcome> {
    const { site, env } = this;
    const m = this.measurement(step);
    const auto = (step.size ?? "auto") === "auto";
    const schedule = site.series.schedule(step.key);
    if (schedule.ramped || !auto) {
      // Not due this round (spaced by the budget): nothing is opened or sent for it.
      const spacing = this.size(step);
      if (auto) env.spaced(step.key, spacing);
      if (!bandwidthDue(schedule, spacing.every, env.periodS)) return "skipped";
    }
    if (step.loaded !== undefined && !this.loadBegun) {
      this.loadBegun = true;
      try {
        await site.link.connectLoad();
        this.loadOpen = true;
      } catch (e) {
        // A fetch transfer goes on without its loaded RTT: a path may refuse WebSockets and
        // not fetch (some proxies do), and the transfer is the measurement.
        if (step.transport === "websocket") throw e;
      }
    }
    let rate: number | undefined;
    if (auto && !schedule.ramped) {
      schedule.ramped = true;
      env.bursting();
      rate = await this.burst(step, m, site.series.streams(step.key).streams);
      if (env.suspended() || !site.link.connected(step.transport)) return "held";
    }
    // Sized from the burst's rate on the first run, else as the due check sized it.
    const sized = this.size(step, rate);
    if (auto) env.spaced(step.key, sized);
    const { bytes, every } = sized;
    if (!env.budget.allows(bytes, env.now())) {
      env.overBudget(bytes);
      return "held";
    }
    const s = site.series.get(step.key);
    const plan = site.series.streams(step.key);
    let streams = typeof step.streams === "number" ? step.streams : plan.streams;
    if (step.streams === "pretest") {
      // A try must last the round trips a probe does to be timed (the core's
      // `transfer::RTT_TIMES`): half a probe sized for a quarter second is shorter than the
      // RTT on a long path.
      const forecast = site.series.next(step.key)?.value;
      const minTry = timedBytes(forecast, this.predictedRtt(step), bytes);
      const found = await streamCount(plan, bytes, minTry, {
        take: (b) => {
          if (env.suspended() || !env.budget.allows(b, env.now())) return false;
          env.budget.spend(b, env.now());
          return true;
        },
        rate: async (b, n) =>
          (
            await this.runTransfer(
              step,
              m,
              { bytes: b, streams: n, timeoutMs: s.timeoutMs()! },
              false,
            )
          ).value,
      });
      streams = found.streams;
      if (found.results !== undefined) env.pretested(step.key, found.results, streams);
    }
    if (env.suspended() || !site.link.connected(step.transport)) return "held";
    schedule.sinceProbeS = 0;
    const r = await this.probe(
      step,
      m,
      bytes,
      streams,
      (timeoutMs) => this.runTransfer(step, m, { bytes, streams, timeoutMs }, true),
      this.periodMs * every,
    );
    if (r !== undefined) {
      plan.measurements = r.event.count;
      plan.surprised = surprised(r.sample.value, r.event.record.forecast);
    }
    return "answered";
  }
}
