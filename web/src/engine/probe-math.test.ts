import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { loadForecasting } from "../forecast";
import {
  aggregateRate,
  autoSize,
  AUTO_MAX_BYTES,
  autoMinBytes,
  autoTargetMs,
  bandwidthDue,
  bandwidthEvery,
  burstNext,
  chooseStreams,
  fetchRtt,
  median,
  newBandwidthSchedule,
  newStreamPlan,
  parseServerTiming,
  PRETEST_EVERY,
  PRETEST_SHARE,
  pretestBytes,
  pretestDue,
  rateMinusRtt,
  retryAfterSeconds,
  splitBytes,
  surprised,
  timedBytes,
  uploadRate,
  type StreamPlan,
  type UploadStream,
  endpointUrl,
} from "./probe-math";
import { probeShare } from "./budget";

beforeAll(async () => {
  await loadForecasting(
    readFileSync(new URL("../../../core/pkg/nowcast_core_bg.wasm", import.meta.url)),
  );
});

describe("rates", () => {
  it("converts bytes per millisecond to Mbit/s by the core's rule", () => {
    expect(rateMinusRtt(125_000, 1000, undefined).mbits).toBe(1); // 1 Mbit in one second
    expect(rateMinusRtt(64 * 1024, 0, undefined).mbits).toBe(0);
  });

  it.each([
    // bytes, raw ms, predicted RTT, expected duration, subtracted (JavaNws §2.1.1)
    [1_250_000, 110, 10, 100, 10],
    [1_250_000, 100, undefined, 100, 0],
    [1_250_000, 100, 0, 100, 0],
    // a prediction above half the probe time is not trusted
    [1_250_000, 100, 60, 100, 0],
    [1_250_000, 100, 50, 50, 50],
  ])("%d bytes in %d ms with predicted RTT %s", (bytes, raw, rtt, duration, subtracted) => {
    const r = rateMinusRtt(bytes, raw, rtt);
    expect(r.durationMs).toBe(duration);
    expect(r.rttSubtractedMs).toBe(subtracted);
    expect(r.mbits).toBeCloseTo(bytes / duration / 125, 12);
  });
});

describe("parallel streams", () => {
  it.each([
    // streams [start, end, bytes], predicted RTT → raw ms, duration, Mbit/s
    ["one stream is rateMinusRtt", [[0, 110, 1_250_000]], 10, 110, 100, 100],
    // Overlapping streams: all bytes over first start → last end, one RTT subtracted.
    [
      "two streams",
      [
        [0, 105, 625_000],
        [2, 110, 625_000],
      ],
      10,
      110,
      100,
      100,
    ],
    // Staggered starts stretch the span: the late stream's start does not shorten it.
    [
      "four streams, staggered",
      [
        [0, 100, 312_500],
        [5, 101, 312_500],
        [10, 102, 312_500],
        [20, 110, 312_500],
      ],
      0,
      110,
      110,
      1_250_000 / 110 / 125,
    ],
    ["no streams", [], 10, 0, 0, 0],
  ] as const)("%s", (_, streams, rtt, raw, duration, rate) => {
    const spans = streams.map(([startMs, endMs, bytes]) => ({ startMs, endMs, bytes }));
    const r = aggregateRate(spans, rtt);
    expect(r.rawMs).toBe(raw);
    expect(r.durationMs).toBe(duration);
    expect(r.mbits).toBeCloseTo(rate, 12);
    expect(r.bytes).toBe(spans.reduce((a, s) => a + s.bytes, 0));
  });

  it.each([
    [1000, 1, [1000]],
    [1000, 4, [250, 250, 250, 250]],
    [1001, 4, [251, 250, 250, 250]],
    [3, 4, [1, 1, 1, 0]],
  ])("splits %d bytes over %d streams", (total, n, parts) => {
    expect(splitBytes(total, n)).toEqual(parts);
  });

  it.each([
    // pretest rates by stream count → chosen streams (the fewest within 1 % of the best)
    ["one stream fills the path", [95.9, 96, 95.5], 1],
    ["two streams add a fifth", [50, 60, 60.5], 2],
    ["only four fill a long fat path", [20, 38, 70], 4],
    ["a gain under 1 % is not worth a stream", [99.2, 100, 99], 1],
    ["a 7 % gain is (one upload stream at 100 Mbit/s)", [88.4, 95.2, 95.0], 2],
    ["so is a 2 % gain", [93.4, 95.3, 94.8], 2],
    ["timed-out candidates are ignored", [0, 40, 0], 2],
    ["no rate at all keeps one", [0, 0, 0], 1],
  ])("%s", (_, rates, chosen) => {
    const results = [1, 2, 4].map((streams, i) => ({ streams, mbits: rates[i]! }));
    expect(chooseStreams(results)).toBe(chosen);
  });

  it("counts each candidate's slowest try, over interleaved passes", () => {
    // Two streams dipped in one try, four did not: four, though two were faster once.
    const tries = [
      { streams: 1, mbits: 80 },
      { streams: 2, mbits: 97 },
      { streams: 4, mbits: 95.3 },
      { streams: 1, mbits: 84 },
      { streams: 2, mbits: 88 },
      { streams: 4, mbits: 95.1 },
    ];
    expect(chooseStreams(tries)).toBe(4);
    // At 1 Gbit/s (the emulated-link sweep): one stream's tries 962.3 and 952.1, two streams'
    // 962.3 and 963.0. One stream reached what two give for sure and dipped 1.1 % once: one.
    expect(
      chooseStreams([
        { streams: 1, mbits: 962.3 },
        { streams: 2, mbits: 962.3 },
        { streams: 4, mbits: 951.4 },
        { streams: 1, mbits: 952.1 },
        { streams: 2, mbits: 963.0 },
        { streams: 4, mbits: 958.2 },
      ]),
    ).toBe(1);
    // ... but a try 40 % low is no scheduling blip: two streams (10 Mbit/s, the same sweep).
    expect(
      chooseStreams([
        { streams: 1, mbits: 5.7 },
        { streams: 2, mbits: 9.6 },
        { streams: 4, mbits: 6.0 },
        { streams: 1, mbits: 9.6 },
        { streams: 2, mbits: 9.6 },
        { streams: 4, mbits: 4.1 },
      ]),
    ).toBe(2);
    // A try without a rate leaves the candidate's other try to count.
    expect(
      chooseStreams([
        { streams: 1, mbits: 95 },
        { streams: 2, mbits: 0 },
        { streams: 1, mbits: 95.5 },
        { streams: 2, mbits: 95.2 },
      ]),
    ).toBe(1);
  });

  it("leaves room in the budget for the pretests: 10 % over the probes", () => {
    expect(PRETEST_SHARE).toBeCloseTo(0.1, 12);
  });

  it.each([
    // probe bytes → pretest bytes per candidate
    [64 * 1024, 64 * 1024],
    [256 * 1024, 128 * 1024],
    [4 * 1024 * 1024, 2 * 1024 * 1024],
    [10_000, 10_000],
  ])("pretests a %d-byte probe with %d bytes", (probe, pretest) => {
    expect(pretestBytes(probe)).toBe(pretest);
  });

  it("pretests with tries that last two round trips on a long path, at most a probe", () => {
    const MiB = 1024 * 1024;
    // 7 Mbit/s behind 160 ms: half of a 512 KiB probe lasts 300 ms, under two round trips
    // (a try that lasts less than one is read without the RTT taken off: half the rate).
    expect(timedBytes(6.7, 160, 1 << 30)).toBe(512 * 1024);
    expect(pretestBytes(512 * 1024, timedBytes(6.7, 160, 512 * 1024))).toBe(512 * 1024);
    // On a short path the half probe is already long enough.
    expect(pretestBytes(4 * MiB, timedBytes(100, 1, 4 * MiB))).toBe(2 * MiB);
    // No forecast or no RTT yet: no floor beyond the smallest automatic size.
    expect(timedBytes(undefined, 160, 1 << 30)).toBe(0);
    expect(timedBytes(100, undefined, 1 << 30)).toBe(0);
  });

  const plan = (p: Partial<StreamPlan>): StreamPlan => ({ ...newStreamPlan(), ...p });
  it.each([
    ["not before the size has grown", plan({ measurements: 2 }), false],
    ["first after three measurements", plan({ measurements: 3 }), true],
    ["not again soon", plan({ measurements: 9, sincePretest: 4 }), false],
    ["again every N rounds", plan({ measurements: 99, sincePretest: PRETEST_EVERY }), true],
    ["sooner on a surprise", plan({ sincePretest: 5, surprised: true }), true],
    ["but not right after one", plan({ sincePretest: 4, surprised: true }), false],
  ])("pretest due: %s", (_, p, due) => {
    expect(pretestDue(p)).toBe(due);
  });

  it.each([
    [100, { value: 90, error: 5 }, false],
    [116, { value: 100, error: 5 }, true],
    [80, { value: 100, error: 5 }, true],
    [100, undefined, false],
    [100, { value: 10, error: 0 }, false],
  ])("%d against the forecast %j: surprised %s", (value, forecast, out) => {
    expect(surprised(value, forecast)).toBe(out);
  });
});

describe("upload rate from the server's receive times", () => {
  const up = (p: Partial<UploadStream>): UploadStream => ({
    startMs: 0,
    endMs: 180,
    bytes: 1_250_000,
    firstByteAt: 1000,
    lastByteAt: 1100,
    firstReadBytes: 0,
    ...p,
  });

  it.each([
    // What the ack says → Mbit/s, duration, RTT subtracted. No acknowledgement RTT is in the
    // server's times, so none is subtracted from them.
    ["every byte timed", [up({})], 100, 100, 0],
    // The first read's 65 536 bytes arrived before firstByteAt: left out, not counted free.
    [
      "the first read's bytes left out",
      [up({ bytes: 1_315_536, firstReadBytes: 65_536 })],
      100,
      100,
      0,
    ],
    // Two reads of 64 KiB 0.5 ms apart: counting both would read twice the rate.
    [
      "a two-read upload",
      [up({ bytes: 131_072, firstReadBytes: 65_536, lastByteAt: 1000.5 })],
      65_536 / 0.5 / 125,
      0.5,
      0,
    ],
    // One read: no duration at the server, so the client's time minus the predicted RTT.
    [
      "a one-read upload",
      [up({ bytes: 125_000, firstReadBytes: 125_000, lastByteAt: 1000, endMs: 30 })],
      50,
      20,
      10,
    ],
    // An older server without firstReadBytes: the client's time, never the overstated rate.
    [
      "an older server's ack",
      [up({ bytes: 125_000, firstReadBytes: undefined, endMs: 30 })],
      50,
      20,
      10,
    ],
    // Parallel streams share the server's clock: earliest first read to latest last read,
    // every stream's first read left out.
    [
      "two streams",
      [
        up({ bytes: 650_000, firstReadBytes: 25_000, firstByteAt: 1000, lastByteAt: 1090 }),
        up({ bytes: 650_000, firstReadBytes: 25_000, firstByteAt: 1002, lastByteAt: 1100 }),
      ],
      100,
      100,
      0,
    ],
    // Small streams in one read each, read a moment apart: no duration to speak of, so the
    // client's time (the two reads' bytes over 0.1 ms would read 10 Gbit/s).
    [
      "one-read streams",
      [
        up({ bytes: 62_500, firstReadBytes: 62_500, lastByteAt: 1000, endMs: 30 }),
        up({
          bytes: 62_500,
          firstReadBytes: 62_500,
          firstByteAt: 1000.1,
          lastByteAt: 1000.1,
          endMs: 30,
        }),
      ],
      50,
      20,
      10,
    ],
  ])("%s", (_, streams, rate, duration, subtracted) => {
    const r = uploadRate(streams, 10);
    expect(r.mbits).toBeCloseTo(rate, 9);
    expect(r.durationMs).toBeCloseTo(duration, 9);
    expect(r.rttSubtractedMs).toBe(subtracted);
  });
});

describe("Server-Timing and Resource Timing", () => {
  it("reads durations by metric name", () => {
    const t = parseServerTiming('proc;dur=0.42, recv;desc="body";dur=12.5, cache, db;dur="3"');
    expect([...t]).toEqual([
      ["proc", 0.42],
      ["recv", 12.5],
      ["db", 3],
    ]);
    expect(parseServerTiming(null).size).toBe(0);
    expect(parseServerTiming("proc;dur=abc").size).toBe(0);
  });

  it("takes the server's time off request-to-first-byte", () => {
    expect(fetchRtt({ requestStart: 100, responseStart: 101.5 }, 0.5)).toBe(1);
    expect(fetchRtt({ requestStart: 100, responseStart: 101.5 }, undefined)).toBe(1.5);
    expect(fetchRtt({ requestStart: 100, responseStart: 100.2 }, 0.5)).toBe(0);
  });

  it("refuses entries without request timing (opaque cross-origin entries)", () => {
    expect(fetchRtt({ requestStart: 0, responseStart: 0 }, 0.1)).toBeUndefined();
    expect(fetchRtt({ requestStart: 5, responseStart: 4 }, 0.1)).toBeUndefined();
  });

  it("reads retry-after from a close reason or a header", () => {
    expect(retryAfterSeconds("byte budget exceeded; retry-after=17")).toBe(17);
    expect(retryAfterSeconds("30")).toBe(30);
    expect(retryAfterSeconds("idle timeout")).toBeUndefined();
    expect(retryAfterSeconds(null)).toBeUndefined();
  });
});

describe("automatic probe size", () => {
  it("starts at 64 KiB without a prediction", () => {
    expect(autoSize(undefined, 1 << 30)).toBe(64 * 1024);
    expect(autoSize(0, 1 << 30)).toBe(64 * 1024);
  });

  it("moves a quarter second of the predicted rate, as a power of two", () => {
    expect(autoTargetMs()).toBe(250);
    expect(autoMinBytes()).toBe(64 * 1024);
    // 100 Mbit/s × 250 ms = 3.125 MB → 4 MiB
    expect(autoSize(100, 1 << 30)).toBe(4 * 1024 * 1024);
    // 1 Mbit/s × 250 ms = 31 KB → the 64 KiB floor
    expect(autoSize(1, 1 << 30)).toBe(64 * 1024);
  });

  it("stays below 32 MiB and the server's cap", () => {
    expect(autoSize(100_000, 1 << 30)).toBe(AUTO_MAX_BYTES);
    expect(autoSize(100_000, 3 * 1024 * 1024)).toBe(3 * 1024 * 1024);
    expect(autoSize(100, 1024)).toBe(64 * 1024);
  });

  it("lasts two predicted round trips where they are longer than the quarter second", () => {
    const MiB = 1024 * 1024;
    // 200 ms: 100 Mbit/s × 400 ms = 5 MB → 8 MiB (4 MiB would last 335 ms, less than two
    // round trips: the RTT is taken off only a transfer that lasts at least one).
    expect(autoSize(100, 1 << 30, 200)).toBe(8 * MiB);
    // 300 ms: 100 Mbit/s × 600 ms = 7.5 MB → 8 MiB; 7 Mbit/s: 525 kB → 1 MiB.
    expect(autoSize(100, 1 << 30, 300)).toBe(8 * MiB);
    expect(autoSize(7, 1 << 30, 300)).toBe(1024 * 1024);
    // A short path keeps the quarter second.
    expect(autoSize(100, 1 << 30, 40)).toBe(4 * MiB);
    expect(autoSize(100, 1 << 30, undefined)).toBe(4 * MiB);
    expect(autoSize(100_000, 1 << 30, 300)).toBe(AUTO_MAX_BYTES);
  });

  it("never grows past the cap for any rate", () => {
    for (let r = 0.5; r < 1e6; r *= 3) {
      const s = autoSize(r, 10 * 1024 * 1024);
      expect(s).toBeGreaterThanOrEqual(64 * 1024);
      expect(s).toBeLessThanOrEqual(10 * 1024 * 1024);
    }
  });
});

describe("first-run burst", () => {
  const MiB = 1024 * 1024;
  /** A scripted link: each try costs `overheadMs` (request, slow start) plus its bytes at
   *  `mbits`; the rate it reads is its bytes over that whole time, as a short probe's does. */
  function ramp(mbits: number, overheadMs: number, cap: number): number[] {
    const sizes: number[] = [];
    let bytes: number | undefined = 64 * 1024;
    while (bytes !== undefined) {
      sizes.push(bytes);
      const ms = overheadMs + (bytes * 8) / (mbits * 1000);
      bytes = burstNext(bytes, (bytes * 8) / (ms * 1000), ms, cap);
      expect(sizes.length).toBeLessThan(20);
    }
    return sizes;
  }

  it("ramps from 64 KiB until a try lasts the target time", () => {
    // 100 Mbit/s, 2 ms of overhead: 64 KiB reads ~72 Mbit/s → its automatic size, 4 MiB
    // (~337 ms), is long enough.
    expect(ramp(100, 2, 1 << 30)).toEqual([64 * 1024, 4 * MiB]);
  });

  it("grows at least fourfold when a short try reads far below the link", () => {
    // 16 Gbit/s behind 3 ms of overhead: 64 KiB reads ~170 Mbit/s (8 MiB), 4 MiB reads
    // ~6.6 Gbit/s (32 MiB), and 32 MiB is the cap though it lasts only ~20 ms.
    expect(ramp(16_000, 3, 1 << 30)).toEqual([64 * 1024, 4 * MiB, 32 * MiB]);
    // A slow link: 1 Mbit/s reads 64 KiB long enough at once.
    expect(ramp(1, 2, 1 << 30)).toEqual([64 * 1024]);
  });

  it("on a long path ramps until a try lasts the RTT and two round trips of transfer", () => {
    // 100 Mbit/s behind 300 ms, each try read as the page reads it (rateMinusRtt: the RTT
    // is taken off only when the transfer lasted at least that long). Before, the 64 KiB try
    // (305 ms raw) ended the burst at 1.7 Mbit/s, and the probes stayed at 64 KiB.
    const sizes: number[] = [];
    let bytes: number | undefined = 64 * 1024;
    while (bytes !== undefined) {
      sizes.push(bytes);
      const raw = 300 + (bytes * 8) / (100 * 1000);
      bytes = burstNext(bytes, rateMinusRtt(bytes, raw, 300).mbits, raw, 1 << 30, 300);
      expect(sizes.length).toBeLessThan(20);
    }
    expect(sizes).toEqual([64 * 1024, 256 * 1024, MiB, 4 * MiB, 16 * MiB]);
    // Without the RTT, the raw time counts as before.
    expect(burstNext(64 * 1024, 1.7, 305, 1 << 30)).toBeUndefined();
  });

  it("grows at most 64-fold when a short try reads a shaper's burst", () => {
    // A 64 KiB try through a token bucket's burst reads 3 Gbit/s: not the 128 MiB that rate
    // asks for (~8 s on the 137 Mbit/s path behind it), but 4 MiB.
    expect(burstNext(64 * 1024, 3000, 0.17, 1 << 30)).toBe(4 * MiB);
  });

  it("stops at the server's cap", () => {
    expect(ramp(16_000, 3, 4 * MiB)).toEqual([64 * 1024, 4 * MiB]);
    expect(burstNext(4 * MiB, 100, 10, 4 * MiB)).toBeUndefined();
  });

  it("ends when a try lasted the target or read nothing", () => {
    expect(burstNext(64 * 1024, 1, autoTargetMs(), 1 << 30)).toBeUndefined();
    expect(burstNext(64 * 1024, 0, 10, 1 << 30)).toBeUndefined();
    expect(burstNext(64 * 1024, NaN, 10, 1 << 30)).toBeUndefined();
  });
});

describe("bandwidth probes spaced by the budget", () => {
  const MiB = 1024 * 1024;
  it("probes every round when the wanted size fits the share", () => {
    expect(bandwidthEvery(64 * 1024, 128 * 1024)).toBe(1);
    expect(bandwidthEvery(128 * 1024, 128 * 1024)).toBe(1);
  });

  it("spaces probes ⌈wanted / share⌉ rounds apart otherwise", () => {
    expect(bandwidthEvery(128 * 1024 + 1, 128 * 1024)).toBe(2);
    // The page's defaults: 500 MiB an hour, 2 s, two transfers a round and pretests.
    const share = probeShare(500 * MiB, 2, 2 * (1 + PRETEST_SHARE)).bytes;
    expect(share).toBe(132_395);
    const k = bandwidthEvery(32 * MiB, share);
    expect(k).toBe(254);
    // Spaced so, the probes spend no more than the budget in an hour.
    expect((3600 / 2 / k) * 2 * (1 + PRETEST_SHARE) * 32 * MiB).toBeLessThanOrEqual(500 * MiB);
  });

  it("keeps the wait in seconds, so that a new period neither restarts nor stretches it", () => {
    const s = newBandwidthSchedule();
    expect(bandwidthDue(s, 254, 2)).toBe(true); // the first round probes at once
    s.sinceProbeS = 0;
    // At a constant period, due every 254th round, as when rounds were counted.
    let rounds = 0;
    while (!bandwidthDue(s, 254, 2)) rounds++;
    expect(rounds + 1).toBe(254);
    // Two minutes at 2 s, then the period goes to a minute: the share per round grows 30-fold
    // and the spacing is 9 rounds (9 min). Due after 7 more rounds (2 + 7 = 9 min), not 9.
    s.sinceProbeS = 0;
    for (let i = 0; i < 60; i++) expect(bandwidthDue(s, 254, 2)).toBe(false);
    rounds = 0;
    while (!bandwidthDue(s, 9, 60)) rounds++;
    expect(rounds + 1).toBe(7);
    // The other way: a minute at 60 s, then 2 s: 254 rounds of 2 s (8.5 min) less the minute.
    s.sinceProbeS = 0;
    expect(bandwidthDue(s, 9, 60)).toBe(false);
    rounds = 0;
    while (!bandwidthDue(s, 254, 2)) rounds++;
    expect(rounds + 1).toBe(224);
  });

  it("never probes when there is no share, and at once when nothing is wanted", () => {
    expect(bandwidthEvery(MiB, 0)).toBe(Infinity);
    expect(bandwidthEvery(0, 0)).toBe(1);
  });
});

describe("median", () => {
  it.each([
    [[], undefined],
    [[5], 5],
    [[3, 1, 2], 2],
    [[4, 1, 3, 2], 2.5],
  ])("of %j is %s", (xs, m) => {
    expect(median(xs)).toBe(m);
  });
});

describe("endpoint URLs", () => {
  it.each([
    ["https://host", "api/ping?n=1", "https://host/api/ping?n=1"],
    ["https://host/", "/ws", "https://host/ws"],
    ["https://host/nowcast", "api/download?bytes=5", "https://host/nowcast/api/download?bytes=5"],
    ["https://host/nowcast/", "/ws", "https://host/nowcast/ws"],
    ["http://127.0.0.1:8080", "ws", "http://127.0.0.1:8080/ws"],
  ])("%s + %s = %s", (base, path, url) => {
    expect(endpointUrl(base, path).href).toBe(url);
  });
});
