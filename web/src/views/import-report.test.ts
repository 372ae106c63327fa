import { describe, expect, it } from "vitest";
import { importSummary, unreadable } from "./import-report";

describe("unreadable", () => {
  it("says an empty file is empty", () => {
    expect(unreadable("")).toBe("the file is empty");
    expect(unreadable(" \n\r\n\t")).toBe("the file is empty");
  });

  it("says a binary file, as the browser decodes it, is not text", () => {
    // A PNG's first bytes: undecodable ones and a NUL.
    const png = new TextDecoder().decode(
      new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]),
    );
    expect(unreadable(png)).toMatch(/^it is not UTF-8 text/);
    // Random bytes without a NUL: mostly undecodable.
    let bytes = "";
    for (let i = 0; i < 4000; i++) bytes += String.fromCharCode(0x80 + ((i * 37) % 0x80));
    const random = new TextDecoder().decode(Uint8Array.from(bytes, (c) => c.charCodeAt(0)));
    expect(random.includes("\0")).toBe(false);
    expect(unreadable(random)).toMatch(/^it is not UTF-8 text/);
  });

  it("lets text through, a stray odd character included", () => {
    expect(unreadable("time,value\n1,2\n")).toBeUndefined();
    expect(unreadable('{"a":1}\r\n\f')).toBeUndefined();
    const long = "1795176000000,20.5\n".repeat(100) + "\ufffd";
    expect(unreadable(long)).toBeUndefined();
  });
});

describe("importSummary", () => {
  const series = (n: number) => ({
    key: "import/1",
    label: "rtt",
    unit: "ms",
    points: Array.from({ length: n }, (_, i) => ({ t: i, value: 1, next: undefined })),
    mae: undefined,
  });

  it("reports a clean file plainly, its notes too", () => {
    expect(
      importSummary({
        file: "rtt.ndjson",
        format: "ndjson",
        series: [series(298)],
        errors: [],
        errorCount: 0,
        notes: ["2 records without a value (timeouts, errors) not read as values"],
      }),
    ).toEqual({
      summary: "rtt.ndjson (ndjson): 298 values in 1 series.",
      details: ["2 records without a value (timeouts, errors) not read as values"],
      problem: false,
    });
  });

  it("names each refused line, one line or more, as a problem", () => {
    const one = importSummary({
      file: "one-bad.ndjson",
      format: "ndjson",
      series: [series(299)],
      errors: [{ line: 151, message: "not valid JSON" }],
      errorCount: 1,
      notes: [],
    });
    expect(one).toEqual({
      summary: "one-bad.ndjson (ndjson): 299 values in 1 series; 1 line refused:",
      details: ["line 151: not valid JSON"],
      problem: true,
    });
    const more = importSummary({
      file: "broken.ndjson",
      format: "ndjson",
      series: [series(5)],
      errors: [{ line: 5, field: "schema_version", message: "major version 2" }],
      errorCount: 4,
      notes: [],
    });
    expect(more.summary).toBe("broken.ndjson (ndjson): 5 values in 1 series; 4 lines refused:");
    expect(more.details).toEqual(["line 5, schema_version: major version 2", "… and 3 more"]);
  });

  it("says nothing was imported, with the reader's message, as a problem", () => {
    expect(
      importSummary({
        file: "notes.txt",
        format: "unknown",
        series: [],
        errors: [],
        errorCount: 0,
        notes: ["notes.txt is in no format Nowcast reads"],
      }),
    ).toEqual({
      summary: "notes.txt: nothing imported.",
      details: ["notes.txt is in no format Nowcast reads"],
      problem: true,
    });
  });
});
