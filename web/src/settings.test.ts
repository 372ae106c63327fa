import { describe, expect, it } from "vitest";
import {
  DEFAULT_SETTINGS,
  formatSize,
  parseMirrorList,
  parseSettings,
  parseSize,
  settingsQuery,
} from "./settings";

describe("settings in the URL", () => {
  it("reads period, size, transport and budget", () => {
    expect(parseSettings("?period=5&size=256k&transport=both&budget=100")).toEqual({
      periodS: 5,
      size: 256 * 1024,
      transport: "both",
      budgetMiB: 100,
      mirrors: [],
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
      size: "auto" as const,
      transport: "http" as const,
      budgetMiB: 50,
      mirrors: ["http://127.0.0.1:8081/", "https://mirror.example.org/nowcast"],
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
});
