// The scheduler on a scripted clock: when rounds start, with rounds that take the time a test
// gives them.

import { describe, expect, it } from "vitest";
import { Scheduler, type Clock } from "./scheduler";

/** A clock whose time moves only when told, running the timers that fall due. */
class ScriptedClock implements Clock {
  private t = 0;
  private timers: { at: number; run: () => void; id: number }[] = [];
  private ids = 0;

  now(): number {
    return this.t;
  }

  after(ms: number, run: () => void): unknown {
    const id = ++this.ids;
    this.timers.push({ at: this.t + ms, run, id });
    return id;
  }

  cancel(timer: unknown): void {
    this.timers = this.timers.filter((x) => x.id !== timer);
  }

  /** Moves time on by `ms`, running each timer at its time (and what it set off). */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await settle();
      const next = this.timers.sort((a, b) => a.at - b.at)[0];
      if (next === undefined || next.at > end) break;
      this.timers.shift();
      this.t = next.at;
      next.run();
    }
    this.t = end;
    await settle();
  }
}

/** Lets the promises that can settle, settle. */
const settle = () => new Promise((r) => setImmediate(r));

/** A scheduler whose rounds take `roundMs` of the scripted clock each; logs their starts. */
function scheduled(periodMs: number, roundMs = 0) {
  const clock = new ScriptedClock();
  const starts: number[] = [];
  const period = { ms: periodMs };
  const s = new Scheduler(
    clock,
    () => period.ms,
    () => {
      starts.push(clock.now());
      return new Promise<void>((resolve) => clock.after(roundMs, resolve));
    },
  );
  return { clock, starts, period, s };
}

describe("the scheduler", () => {
  it("starts a round at once, then one period after the last one started", async () => {
    const { clock, starts, s } = scheduled(2000, 300);
    s.schedule();
    await clock.advance(7000);
    expect(starts).toEqual([0, 2000, 4000, 6000]);
  });

  it("never runs two rounds at once: one longer than the period delays the next", async () => {
    const { clock, starts, s } = scheduled(1000, 2500);
    s.schedule();
    await clock.advance(6000);
    expect(starts).toEqual([0, 2500, 5000]);
  });

  it("starts nothing while suspended, and goes on at once on resume", async () => {
    const { clock, starts, s } = scheduled(1000, 100);
    s.schedule();
    await clock.advance(1500);
    s.suspend();
    expect(s.suspended).toBe(true);
    await clock.advance(5000);
    expect(starts).toEqual([0, 1000]);
    s.resume();
    await clock.advance(1500);
    expect(starts).toEqual([0, 1000, 6500, 7500]);
  });

  it("lets a round that runs end when suspended, and starts none after it", async () => {
    const { clock, starts, s } = scheduled(1000, 800);
    s.schedule();
    await clock.advance(100);
    s.suspend();
    expect(s.inRound).toBe(true);
    await clock.advance(800);
    expect(s.inRound).toBe(false);
    await clock.advance(5000);
    expect(starts).toEqual([0]);
  });

  it("takes a new period from the next round on, counted from the last start", async () => {
    const { clock, starts, period, s } = scheduled(10_000);
    s.schedule();
    await clock.advance(3000);
    period.ms = 1000;
    s.schedule();
    await clock.advance(2500);
    expect(starts).toEqual([0, 3000, 4000, 5000]);
  });

  it("starts the next round at once when told to (a new target)", async () => {
    const { clock, starts, s } = scheduled(60_000);
    s.schedule();
    await clock.advance(1000);
    s.soon();
    s.schedule();
    await clock.advance(0);
    expect(starts).toEqual([0, 1000]);
  });

  it("backs off for the seconds the server named, and forgets it on request", async () => {
    const { clock, s } = scheduled(1000);
    expect(s.backingOff).toBe(false);
    s.backOff(30);
    await clock.advance(29_999);
    expect(s.backingOff).toBe(true);
    await clock.advance(1);
    expect(s.backingOff).toBe(false);
    s.backOff(30);
    s.clearBackoff();
    expect(s.backingOff).toBe(false);
  });

  it("lets work wait for the round that runs to end", async () => {
    const { clock, s } = scheduled(10_000, 500);
    await s.betweenRounds();
    s.schedule();
    await clock.advance(100);
    let waited = false;
    void s.betweenRounds().then(() => (waited = true));
    await clock.advance(300);
    expect(waited).toBe(false);
    await clock.advance(100);
    expect(waited).toBe(true);
  });
});
