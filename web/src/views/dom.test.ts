import { describe, expect, it } from "vitest";
import { OncePerFrame } from "./dom";

describe("work asked for once a frame", () => {
  it("runs once at the next frame however often it is asked, and again for each later frame", () => {
    const frames: (() => void)[] = [];
    let runs = 0;
    const once = new OncePerFrame(
      () => runs++,
      (f) => frames.push(f),
    );
    once.request();
    once.request();
    once.request();
    expect(runs).toBe(0);
    expect(frames).toHaveLength(1);
    frames.shift()!();
    expect(runs).toBe(1);
    // The next change, however soon after (a second, not the 5 s the predictability view
    // waited), is shown at the frame after it.
    once.request();
    frames.shift()!();
    expect(runs).toBe(2);
    // Nothing asked: nothing runs.
    expect(frames).toHaveLength(0);
  });
});
