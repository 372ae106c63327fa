/**
 * The long fuzz run: every property of test/fuzz-properties.ts (every decoder that reads bytes
 * a client chose) for FUZZ_SECONDS each (default 20, 3 with BENCH_QUICK), seeded with the
 * corpus. `npm test` runs the same properties for well under a second each. A failure prints
 * fast-check's shrunk counterexample: add it to test/corpus/ and fix the decoder.
 */
import fc from "fast-check";
import { fuzzProperties } from "../test/fuzz-properties.js";
import { envNumber, machine } from "./common.js";

const QUICK = process.env.BENCH_QUICK !== undefined && process.env.BENCH_QUICK !== "";
const SECONDS = envNumber("FUZZ_SECONDS", QUICK ? 3 : 20);

console.log(`echo-node fuzz: ${machine()}; ${SECONDS} s per property\n`);
let failed = 0;
for (const p of fuzzProperties()) {
  const started = performance.now();
  const details = await fc.check(p.property, {
    numRuns: Number.MAX_SAFE_INTEGER,
    interruptAfterTimeLimit: SECONDS * 1000,
    examples: p.examples,
  });
  const s = (performance.now() - started) / 1000;
  const verdict = details.failed ? "FAILED" : "ok";
  console.log(
    `${verdict.padEnd(7)}${String(details.numRuns).padStart(10)} inputs in ${s.toFixed(1)} s  ${p.name}`,
  );
  if (details.failed) {
    failed++;
    console.log(`       counterexample: ${fc.stringify(details.counterexample)}`);
    console.log(`       ${String(details.errorInstance).split("\n")[0]}`);
  }
}
console.log(
  `\n${failed === 0 ? "no failures" : `${failed} properties failed`}; date ${new Date().toISOString()}`,
);
process.exitCode = failed === 0 ? 0 : 1;
