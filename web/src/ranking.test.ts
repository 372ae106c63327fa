import { describe, expect, it } from "vitest";
import { predict, rank, transferMs, type Site } from "./ranking";

const MB = 1_000_000;

describe("transferMs", () => {
  it.each([
    // 1 MB at 8 Mbit/s is one second.
    { bytes: MB, mbits: 8, ms: 1000 },
    { bytes: 125_000, mbits: 1000, ms: 1 },
    { bytes: 0, mbits: 10, ms: 0 },
    { bytes: MB, mbits: 0, ms: Infinity },
    { bytes: MB, mbits: -3, ms: Infinity },
    { bytes: MB, mbits: NaN, ms: Infinity },
  ])("$bytes B at $mbits Mbit/s → $ms ms", ({ bytes, mbits, ms }) => {
    expect(transferMs(bytes, mbits)).toBe(ms);
  });
});

describe("predict", () => {
  it.each([
    {
      name: "RTT plus size over bandwidth, and the range from the errors",
      site: { url: "a", rtt: { value: 20, error: 5 }, bandwidth: { value: 8, error: 2 } },
      k: 1,
      // 20 + 1000; low 15 + 8e6/10e3 = 815; high 25 + 8e6/6e3.
      want: { timeMs: 1020, lowMs: 815, highMs: 25 + 8e6 / 6e3 },
    },
    {
      name: "k widens the range",
      site: { url: "a", rtt: { value: 20, error: 5 }, bandwidth: { value: 8, error: 1 } },
      k: 2,
      want: { timeMs: 1020, lowMs: 10 + 800, highMs: 30 + 8e6 / 6e3 },
    },
    {
      name: "the low RTT stops at zero",
      site: { url: "a", rtt: { value: 1, error: 4 }, bandwidth: { value: 8, error: 0 } },
      k: 1,
      want: { timeMs: 1001, lowMs: 1000, highMs: 1005 },
    },
    {
      name: "a bandwidth error as large as the forecast gives no upper bound",
      site: { url: "a", rtt: { value: 10, error: 1 }, bandwidth: { value: 8, error: 8 } },
      k: 1,
      want: { timeMs: 1010, lowMs: 9 + 500, highMs: Infinity },
    },
    {
      name: "a mirror without data yet",
      site: { url: "a", rtt: undefined, bandwidth: undefined },
      k: 1,
      want: { timeMs: undefined, lowMs: undefined, highMs: undefined },
    },
    {
      name: "RTT known, bandwidth not yet",
      site: { url: "a", rtt: { value: 10, error: 1 }, bandwidth: undefined },
      k: 1,
      want: { timeMs: undefined, lowMs: undefined, highMs: undefined },
    },
    {
      name: "zero bandwidth",
      site: { url: "a", rtt: { value: 10, error: 1 }, bandwidth: { value: 0, error: 1 } },
      k: 1,
      want: { timeMs: undefined, lowMs: undefined, highMs: undefined },
    },
    {
      name: "unknown (NaN) bandwidth",
      site: { url: "a", rtt: { value: 10, error: 1 }, bandwidth: { value: NaN, error: 1 } },
      k: 1,
      want: { timeMs: undefined, lowMs: undefined, highMs: undefined },
    },
  ])("$name", ({ site, k, want }) => {
    expect(predict(site as Site, MB, k)).toEqual({ url: "a", ...want });
  });
});

describe("rank", () => {
  const site = (url: string, rtt?: number, mbits?: number): Site => ({
    url,
    rtt: rtt === undefined ? undefined : { value: rtt, error: 1 },
    bandwidth: mbits === undefined ? undefined : { value: mbits, error: 1 },
  });

  it.each([
    {
      name: "fastest first",
      sites: [site("slow", 10, 8), site("fast", 10, 80)],
      want: ["fast", "slow"],
    },
    {
      // For a small file the RTT decides, for a large one the bandwidth.
      name: "a lower RTT wins a small file",
      bytes: 1000,
      sites: [site("far-wide", 100, 1000), site("near-narrow", 5, 10)],
      want: ["near-narrow", "far-wide"],
    },
    {
      name: "a wider link wins a large file",
      sites: [site("near-narrow", 5, 10), site("far-wide", 100, 1000)],
      want: ["far-wide", "near-narrow"],
    },
    {
      name: "sites without data last, in their order",
      sites: [site("new1"), site("ok", 10, 8), site("zero", 10, 0), site("new2", 5)],
      want: ["ok", "new1", "zero", "new2"],
    },
    { name: "nothing to rank", sites: [], want: [] },
  ])("$name", ({ sites, bytes, want }) => {
    expect(rank(sites, bytes ?? MB, 1).map((r) => r.url)).toEqual(want);
  });
});
