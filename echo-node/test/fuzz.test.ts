/**
 * Every network-facing decoder under property-based fuzzing (fuzz-properties.ts), seeded with
 * the corpus, bounded to a few seconds in all. The long run is `npm -w echo-node run
 * bench:hostile`.
 */
import fc from "fast-check";
import { describe, it } from "vitest";
import { fuzzProperties } from "./fuzz-properties.js";

/** Per property: enough random inputs to find shallow bugs, never more than this long. */
const RUNS = 1000;
const TIME_LIMIT_MS = 400;

describe("fuzzing", () => {
  for (const p of fuzzProperties()) {
    it(p.name, () => {
      fc.assert(p.property, {
        numRuns: RUNS,
        interruptAfterTimeLimit: TIME_LIMIT_MS,
        examples: p.examples,
      });
    });
  }
});
