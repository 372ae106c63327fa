import { describe, expect, it } from "vitest";
import { afterWarmUp, pingBytes, pingPlan, pingRtt } from "./echo";

describe("the timed pings of an RTT probe", () => {
  it("sends a warm-up and a train on a short path, two pings on a middling one, one on a long one", () => {
    expect(pingPlan(0.05)).toEqual({ count: 9, warmUp: 1 });
    expect(pingPlan(4.99)).toEqual({ count: 9, warmUp: 1 });
    expect(pingPlan(5)).toEqual({ count: 2, warmUp: 1 });
    expect(pingPlan(49.9)).toEqual({ count: 2, warmUp: 1 });
    expect(pingPlan(50)).toEqual({ count: 1, warmUp: 0 });
    expect(pingPlan(800)).toEqual({ count: 1, warmUp: 0 });
    // No forecast yet (the first probe): a warm-up and one timed ping.
    expect(pingPlan(undefined)).toEqual({ count: 2, warmUp: 1 });
  });

  it("on a first probe, follows a warm-up alone with the plan its round trip asks for", () => {
    // A short path gets its train of eight; a middling or long one a single timed ping.
    expect(afterWarmUp(0.9)).toBe(8);
    expect(afterWarmUp(4.99)).toBe(8);
    expect(afterWarmUp(5)).toBe(1);
    expect(afterWarmUp(49.9)).toBe(1);
    expect(afterWarmUp(300)).toBe(1);
  });

  it("is the median of the pings after the warm-up", () => {
    // The warm-up (3.1) is left out; of the eight others the median is (0.05 + 0.06) / 2.
    expect(pingRtt([3.1, 0.04, 0.06, 0.05, 0.9, 0.05, 0.07, 0.06, 0.04], 1)).toBeCloseTo(0.055, 12);
    expect(pingRtt([2.0, 41.5], 1)).toBe(41.5);
    expect(pingRtt([120.25], 0)).toBe(120.25);
    // A reply with fewer times than the warm-up asked for still gives its last.
    expect(pingRtt([7], 1)).toBe(7);
  });

  it("costs what crosses the wire", () => {
    // One ping: its frame (4) and pong (8), the PING (12) and a reply of one time (2 + 6 + 4).
    expect(pingBytes(1)).toBe(4 + 8 + 12 + 2 + 6 + 4);
    expect(pingBytes(9) - pingBytes(1)).toBe(8 * (12 + 4));
  });
});
