import { describe, expect, it } from "vitest";
import type { StatusEvent } from "../messages";
import { stateText } from "./console-view";

const status = (over: Partial<StatusEvent>): StatusEvent => ({
  type: "status",
  state: "running",
  message: "",
  bytesThisHour: 4 << 20,
  bytesSinceStart: 4 << 20,
  budgetBytes: 5 << 20,
  periodS: 2,
  bandwidth: { everyS: {}, limit: undefined, capped: false },
  roundBytes: 1 << 20,
  budgetResumesAt: undefined,
  outage: undefined,
  waitUntil: undefined,
  ...over,
});

describe("the status line", () => {
  it("says the target cannot be reached whatever holds the bandwidth probes", () => {
    // With the budget's pause it said "Measuring every 2 s (bandwidth paused)" under a
    // banner saying the target could not be reached.
    const outage = { since: 0, reason: "no connection" };
    expect(stateText(status({ state: "over-budget", outage }))).toBe("Cannot reach the target");
    expect(stateText(status({ state: "running", outage }))).toBe("Cannot reach the target");
    expect(
      stateText(status({ state: "backing-off", outage: { ...outage, notEchoNode: true } })),
    ).toBe("The target is not an echo-node");
    // Paused by the user: that is what holds.
    expect(stateText(status({ state: "suspended", outage }))).toBe("Paused");
    expect(stateText(status({ state: "over-budget" }))).toBe(
      "Measuring every 2 s (bandwidth paused)",
    );
  });
});
