import { describe, expect, it } from "vitest";
import {
  budgetLastsS,
  budgetStrain,
  DEFAULT_SETTINGS,
  endpointName,
  formatSize,
  parseMirrorList,
  parseSettings,
  parseSize,
  parseTarget,
  readSettings,
  settingsQuery,
  transfersPerRound,
} from "./settings";

describe("settings in the URL", () => {
  it("reads period, size, transport and budget", () => {
    expect(parseSettings("?period=5&size=256k&transport=both&budget=100")).toEqual({
      periodS: 5,
      size: 256 * 1024,
      transport: "both",
      budgetMiB: 100,
      mirrors: [],
      target: undefined,
    });
  });

  it("keeps defaults for what is missing or unreadable, and clamps the period", () => {
    expect(parseSettings("")).toEqual(DEFAULT_SETTINGS);
    expect(parseSettings("?period=abc&size=huge&transport=carrier-pigeon&budget=-1")).toEqual(
      DEFAULT_SETTINGS,
    );
    expect(parseSettings("?period=0.1").periodS).toBe(1);
    expect(parseSettings("?period=3600").periodS).toBe(300);
  });

  it.each([
    ["auto", "auto"],
    ["64k", 65536],
    ["4M", 4 * 1024 * 1024],
    ["65536", 65536],
    ["512", undefined],
    ["1.5m", undefined],
  ] as const)("size %s", (text, size) => {
    expect(parseSize(text)).toBe(size);
  });

  it("writes sizes back in the same form", () => {
    for (const s of ["auto", "64k", "512k", "1m", "16m", "70000"]) {
      expect(formatSize(parseSize(s)!)).toBe(s);
    }
  });

  it("round-trips through the query string and leaves defaults out", () => {
    const s = {
      periodS: 10,
      size: 1024 * 1024,
      transport: "http" as const,
      budgetMiB: 50,
      mirrors: ["http://127.0.0.1:8081/", "https://mirror.example.org/nowcast"],
      target: "https://mirror.example.org/nowcast",
    };
    expect(parseSettings(settingsQuery(s))).toEqual(s);
    expect(settingsQuery(DEFAULT_SETTINGS)).toBe("");
    expect(settingsQuery({ ...DEFAULT_SETTINGS, periodS: 1 })).toBe("?period=1");
  });

  it.each([
    ["", []],
    [
      "https://a.example,http://b.example:8080/x",
      ["https://a.example/", "http://b.example:8080/x"],
    ],
    // Repeats, non-http schemes and non-URLs are left out.
    ["https://a.example, https://a.example/ ,ftp://c.example,not a url", ["https://a.example/"]],
  ] as const)("mirrors %j", (text, urls) => {
    expect(parseMirrorList(text)).toEqual(urls);
  });

  it.each([
    ["http://127.0.0.1:8081", "http://127.0.0.1:8081/"],
    [" https://mirror.example.org/nowcast ", "https://mirror.example.org/nowcast"],
    // A WebSocket URL names the same server; its /ws path is the endpoint, not the base.
    ["ws://127.0.0.1:8081/ws", "http://127.0.0.1:8081/"],
    ["wss://mirror.example.org/nowcast/ws", "https://mirror.example.org/nowcast/"],
    ["wss://mirror.example.org", "https://mirror.example.org/"],
    // Query and fragment are not part of an echo-node's address.
    ["https://m.example/?x=1#y", "https://m.example/"],
  ] as const)("target %j is the echo-node at %s", (text, base) => {
    expect(parseTarget(text)).toBe(base);
  });

  it.each([
    ["mirror.example.org", 'target "mirror.example.org" is not a URL'],
    ["ftp://m.example/", 'target "ftp://m.example/" must be an http(s) or ws(s) URL, not ftp:'],
    ["javascript:alert(1)", "must be an http(s) or ws(s) URL, not javascript:"],
  ] as const)("refuses the target %j", (text, message) => {
    const r = parseTarget(text);
    expect(r).toBeInstanceOf(Error);
    expect((r as Error).message).toContain(message);
  });

  it("reads ?target=, and falls back to the site with a message when it is bad", () => {
    const good = readSettings("?target=http%3A%2F%2F127.0.0.1%3A8081%2F&period=5");
    expect(good.settings.target).toBe("http://127.0.0.1:8081/");
    expect(good.settings.periodS).toBe(5);
    expect(good.problems).toEqual([]);
    const bad = readSettings("?target=nonsense&period=5");
    expect(bad.settings).toEqual({ ...DEFAULT_SETTINGS, periodS: 5 });
    expect(bad.problems).toEqual(['target "nonsense" is not a URL; measuring this site instead']);
    // Absent or empty: the site, and nothing to say.
    for (const q of ["", "?target=", "?target=%20"]) {
      expect(readSettings(q)).toEqual({ settings: DEFAULT_SETTINGS, problems: [] });
    }
  });

  it("writes the target to the URL only when there is one", () => {
    const s = { ...DEFAULT_SETTINGS, target: "http://127.0.0.1:8081/" };
    expect(settingsQuery(s)).toBe("?target=http%3A%2F%2F127.0.0.1%3A8081%2F");
    expect(parseSettings(settingsQuery(s))).toEqual(s);
  });

  it.each([
    ["http://127.0.0.1:8081/", "127.0.0.1:8081"],
    ["https://mirror.example.org/nowcast/", "mirror.example.org/nowcast"],
    ["https://mirror.example.org:443/", "mirror.example.org"],
  ] as const)("names the endpoint %s %j", (base, name) => {
    expect(endpointName(base)).toBe(name);
  });
});

describe("the budget a choice of size and period needs", () => {
  it("warns of a size and period that spend the hour's budget early, and how early", () => {
    // 16 MiB down and up every second: 32 MiB a round, 500 MiB last 15.6 rounds.
    const s = {
      periodS: 1,
      size: 16 * 1024 * 1024,
      transport: "websocket",
      budgetMiB: 500,
    } as const;
    const strain = budgetStrain(s);
    expect(strain?.lastsS).toBeCloseTo(500 / 32, 9);
    expect(strain?.hourBytes).toBe(32 * 1024 * 1024 * 3600);
    // The default, the automatic size, always fits (its probes are spaced by the budget).
    expect(DEFAULT_SETTINGS.size).toBe("auto");
    expect(budgetStrain({ ...DEFAULT_SETTINGS })).toBeUndefined();
    expect(budgetStrain({ ...s, size: "auto" })).toBeUndefined();
    // A mirror adds its download.
    expect(budgetStrain({ ...DEFAULT_SETTINGS, size: 128 * 1024 }, 1)).toBeDefined();
    expect(transfersPerRound("http", 2)).toBe(4);
  });

  it("reckons how long what is left lasts at the last round's pace", () => {
    expect(budgetLastsS(100, 10, 2)).toBe(20);
    expect(budgetLastsS(-5, 10, 2)).toBe(0);
    expect(budgetLastsS(100, 0, 2)).toBe(Infinity);
  });
});
