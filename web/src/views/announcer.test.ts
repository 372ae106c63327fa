import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AT_ONCE, Announcer } from "./announcer";

describe("Announcer", () => {
  let said: string[];
  let announcer: Announcer;
  beforeEach(() => {
    vi.useFakeTimers();
    said = [];
    announcer = new Announcer((t) => said.push(t));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("says a topic once per gist, not with every new figure", () => {
    announcer.say("results", "steady", "RTT 1.0 ms, steady", AT_ONCE);
    announcer.say("results", "steady", "RTT 1.1 ms, steady", AT_ONCE);
    announcer.say("results", "steady", "RTT 1.2 ms, steady", AT_ONCE);
    expect(said).toEqual(["RTT 1.0 ms, steady"]);
  });

  it("waits for figures that arrive together and says the newest", () => {
    const pace = { settleMs: 2000, gapMs: 60_000 };
    announcer.say("results", "down", "Download 90 Mbit/s", pace);
    vi.advanceTimersByTime(500);
    announcer.say("results", "down,up", "Download 90 Mbit/s; upload 40 Mbit/s", pace);
    vi.advanceTimersByTime(500);
    announcer.say("results", "down,up,rtt", "Download 91 Mbit/s; upload 40 Mbit/s; RTT 1 ms", pace);
    expect(said).toEqual([]);
    vi.advanceTimersByTime(1000);
    expect(said).toEqual(["Download 91 Mbit/s; upload 40 Mbit/s; RTT 1 ms"]);
  });

  it("keeps a gap between a topic's announcements, and drops a change that went back", () => {
    const pace = { settleMs: 0, gapMs: 60_000 };
    announcer.say("results", "steady", "steady", pace);
    vi.advanceTimersByTime(10_000);
    announcer.say("results", "variable", "variable", pace);
    vi.advanceTimersByTime(10_000);
    // Back to what was said: nothing to say at the end of the gap.
    announcer.say("results", "steady", "steady again", pace);
    vi.advanceTimersByTime(60_000);
    expect(said).toEqual(["steady"]);
    announcer.say("results", "erratic", "erratic", pace);
    expect(said).toEqual(["steady", "erratic"]);
    announcer.say("results", "steady", "steady", pace);
    vi.advanceTimersByTime(59_999);
    expect(said).toEqual(["steady", "erratic"]);
    vi.advanceTimersByTime(1);
    expect(said).toEqual(["steady", "erratic", "steady"]);
  });

  it("paces each topic on its own, and records a gist given without words", () => {
    const pace = { settleMs: 0, gapMs: 60_000 };
    announcer.say("results", "a", "results a", pace);
    announcer.say("ranking", "x", "ranking x", pace);
    announcer.say("banner", "outage", "Can't reach it", AT_ONCE);
    announcer.say("banner", "", "", AT_ONCE);
    announcer.say("banner", "outage", "Can't reach it again", AT_ONCE);
    expect(said).toEqual(["results a", "ranking x", "Can't reach it", "Can't reach it again"]);
  });
});
