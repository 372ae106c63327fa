/**
 * The `nowcast` command's own files through the page's file input: a `nowcast udp --json` run
 * against `nowcast serve` on loopback (its loss, a fraction in the records, must read as a
 * percentage everywhere the page shows it), the same records with broken lines (each named by
 * its line of the file, the rest kept), a broken pretty-printed document (named by the file's
 * line and column too), and the report of `nowcast forecast --json` (named as what it is, by
 * the core's reader, not "in no format Nowcast reads"). The binary is the release build in
 * target/ (`npm test` builds it); without it the test is skipped. The server is stopped and
 * the files removed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { missing, startRig, type Rig } from "./harness.js";
import { NOWCAST, nowcastMissing } from "./netns.js";
import { openPage, sleep } from "./page-helpers.js";
import { freePort } from "./ports.js";

const run = promisify(execFile);
const skip = missing() ?? nowcastMissing();
if (skip !== undefined) console.warn(`nowcast-files: skipped (${skip})`);

describe.skipIf(skip !== undefined)("the nowcast command's files imported into the page", () => {
  let rig: Rig;
  let dir: string;
  let server: ChildProcess | undefined;
  const file = (name: string) => join(dir, name);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "nowcast-files-"));
    const port = await freePort();
    server = spawn(NOWCAST, ["serve", "--bind", "127.0.0.1", "--port", String(port)], {
      stdio: "ignore",
    });
    // `nowcast udp` exits 1 while nothing answers yet: tried again until the server is up.
    let records = "";
    for (let i = 0; i < 50 && records === ""; i++) {
      try {
        const args = ["udp", `127.0.0.1:${port}`, "--json", "--count", "4", "--period", "0.2"];
        records = (await run(NOWCAST, [...args, "--probes", "10", "--interval", "2"])).stdout;
      } catch {
        await sleep(100);
      }
    }
    expect(records).toMatch(/"metric":"loss"/);
    writeFileSync(file("udp.ndjson"), records);
    // The same records with two broken lines, the 2nd and the 5th of the file.
    const lines = records.trimEnd().split("\n");
    // (Chromium's JSON.parse says where in it: "at position 25 (line 1 column 26)"; the core's
    // reader keeps the column only.)
    lines.splice(1, 0, '{"schema_version":"1.2", truncated');
    lines.splice(4, 0, lines[3]!.replace(/"value":[^,]+/, '"value":"fast"'));
    // One whose JSON.parse message names no place ("Unexpected token '}', … is not valid
    // JSON"), indented: the column is found by the reader, and is the file's.
    lines.push('  {"schema_version":"1.2","value":tru}');
    writeFileSync(file("broken.ndjson"), lines.join("\n") + "\n");
    // A pretty-printed document (iperf3 -J's shape) broken on its 4th line, the file's 6th:
    // named by the file's line and its column, not by the document's first line.
    writeFileSync(
      file("broken-document.json"),
      '# iperf3 -J, edited\n\n{\n  "start": {},\n  "intervals": [\n    {"sum": oops}\n  ]\n}\n',
    );
    // A series and nowcast forecast's report on it.
    const t0 = Date.now() - 600_000;
    const csv = Array.from({ length: 60 }, (_, i) => `${t0 + i * 10_000},${20 + (i % 7)}`);
    writeFileSync(file("series.csv"), `time,value\n${csv.join("\n")}\n`);
    const report = (await run(NOWCAST, ["forecast", "--json", file("series.csv")])).stdout;
    writeFileSync(file("forecast.json"), report);
    rig = await startRig();
  }, 60_000);

  afterAll(async () => {
    server?.kill();
    await rig?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("shows a loss rate in %, names broken lines by the file's line, and a report as a report", async () => {
    const { page, done } = await openPage(rig, "?period=300");
    await page.click("#suspend");
    const names = ["udp.ndjson", "broken.ndjson", "broken-document.json", "forecast.json"];
    await page.setInputFiles(
      "#import",
      names.map((n) => file(n)),
    );
    await page.waitForFunction(
      (n) => document.querySelectorAll("#import-report > div").length === n,
      names.length,
      { timeout: 20_000, polling: 50 },
    );
    const report = (await page.textContent("#import-report")) ?? "";

    // The loss series: its figures, its graph's caption and axis, its summary, in %.
    const rows = await page.$$eval('tr[data-series^="import/"]', (trs) =>
      trs.map((tr) => ({
        key: tr.dataset.series ?? "",
        label: tr.querySelector("th")?.textContent ?? "",
        cells: Array.from(tr.querySelectorAll("td"), (td) => td.textContent ?? ""),
      })),
    );
    const loss = rows.find((r) => /^loss\/udp .*\(udp\.ndjson\)$/.test(r.label));
    expect(loss, rows.map((r) => r.label).join(" | ")).toBeDefined();
    expect(loss!.cells[0]).toMatch(/^[\d.]+ %$/);
    // In % either way: "1.20 % ± 0.400 %", or its range within 0–100 % where the spread
    // passes them ("0 % (likely 0–11.5 %)").
    expect(loss!.cells[1]).toMatch(/^[\d.]+ % (± [\d.]+ %|\(likely [\d.]+–[\d.]+ %\))$/);
    const figure = page.locator(`figure[data-series="${loss!.key}"]`);
    expect(await figure.locator("figcaption").textContent()).toMatch(/^loss\/udp .* \(%\)$/);
    const summary = (await figure.locator(".summary").textContent()) ?? "";
    expect(summary).toMatch(/ %/);
    expect(`${loss!.cells.join(" ")} ${summary}`).not.toMatch(/fraction/);

    // Broken lines: named by their line of the file, the rest kept.
    const kept = readFileSync(file("udp.ndjson"), "utf8")
      .trimEnd()
      .split("\n")
      .filter((l) => (JSON.parse(l) as { value: unknown }).value !== null).length;
    expect(report).toContain(
      `broken.ndjson (ndjson): ${kept} values in 3 series; 3 lines refused:`,
    );
    expect(report).toMatch(/line 2: not valid JSON \([^)]* at column \d+\)/);
    expect(report).toMatch(
      new RegExp(
        `line ${readFileSync(file("broken.ndjson"), "utf8").trimEnd().split("\n").length}: not valid JSON \\(Unexpected token [^)]* at column 38\\)`,
      ),
    );
    expect(report).toContain("line 5, value:");
    expect(report).not.toMatch(/line 1 column/);
    expect(report).toContain("broken-document.json: nothing imported; 1 line refused:");
    expect(report).toMatch(/line 6: not valid JSON \([^]* at column 13\)/);
    expect(report).not.toMatch(/line 3: not valid JSON/);

    // The forecast's report: what it is, and what to import instead.
    expect(report).toContain("line 1 is nowcast forecast's report on a series, not the series");
    expect(report).not.toMatch(/forecast\.json[^.]*in no format/);
    await done();
  }, 60_000);
});
