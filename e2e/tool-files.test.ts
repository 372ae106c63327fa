/**
 * Real tools' files through the page's file input (issue 12): iperf3 (TCP, and UDP with its
 * jitter and loss), ping, mtr --json, irtt and sockperf are run here on loopback, their files
 * imported into the page served by a real echo-node, and each must show as the series the
 * core's reader (core/src/import, the one `nowcast forecast` uses) names, with its unit; a file
 * in no supported format gets one message naming what is supported. Every server started here
 * is stopped, and the files are removed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { missing, startRig, type Rig } from "./harness.js";
import { openPage, sleep } from "./page-helpers.js";
import { freePort } from "./ports.js";

const run = promisify(execFile);
const TOOLS = ["iperf3", "ping", "mtr", "irtt", "sockperf"];
const which = (tool: string) =>
  ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin"].some((d) => existsSync(join(d, tool)));
const absent = TOOLS.filter((t) => !which(t));
const skip = missing() ?? (absent.length > 0 ? `not installed: ${absent.join(", ")}` : undefined);
if (skip !== undefined) console.warn(`tool-files: skipped (${skip})`);

const servers: ChildProcess[] = [];

/**
 * Starts a tool's server and waits (at most 5 s) until it prints `ready` (iperf3's one-off
 * server must not be probed: a probe's connection would be its one test) or, without it,
 * until it accepts a TCP connection on `port`.
 */
async function serve(cmd: string, args: string[], port: number, ready?: string): Promise<void> {
  const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "ignore"] });
  servers.push(p);
  let out = "";
  p.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  for (let i = 0; i < 100; i++) {
    if (p.exitCode !== null) throw new Error(`${cmd} ${args.join(" ")} exited (${p.exitCode})`);
    if (ready === undefined ? await listening(port) : out.includes(ready)) return;
    await sleep(50);
  }
  throw new Error(`${cmd} ${args.join(" ")} did not become ready in 5 s`);
}

/** Whether something accepts TCP connections on `port`. */
const listening = (port: number) =>
  run("bash", ["-c", `exec 3<>/dev/tcp/127.0.0.1/${port}`]).then(
    () => true,
    () => false,
  );

describe.skipIf(skip !== undefined)("real tools' files imported into the page", () => {
  let rig: Rig;
  let dir: string;
  const files: Record<string, string> = {};

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "nowcast-tool-files-"));
    const file = (name: string, text: string) => {
      files[name] = join(dir, name);
      writeFileSync(files[name], text);
    };

    // iperf3: a one-off server for each test; TCP up, then UDP down (-R), whose intervals the
    // client received and so carry jitter and loss.
    for (const [name, args] of [
      ["iperf3-tcp.json", ["-t", "1", "-i", "0.25"]],
      ["iperf3-udp.json", ["-u", "-b", "20M", "-R", "-t", "1", "-i", "0.25"]],
    ] as const) {
      const port = await freePort();
      await serve(
        "iperf3",
        ["-s", "-1", "--forceflush", "-B", "127.0.0.1", "-p", String(port)],
        port,
        "Server listening",
      );
      const { stdout } = await run("iperf3", [
        "-c",
        "127.0.0.1",
        "-p",
        String(port),
        "-J",
        ...args,
      ]);
      expect(JSON.parse(stdout), `iperf3 ${args.join(" ")}`).not.toHaveProperty("error");
      file(name, stdout);
    }

    const ping = await run("ping", ["-c", "3", "-i", "0.2", "127.0.0.1"]);
    file("ping.txt", ping.stdout);

    const mtr = await run("mtr", ["--json", "-n", "-c", "3", "-i", "0.2", "127.0.0.1"]);
    file("mtr.json", mtr.stdout);

    const irttPort = await freePort();
    const irttServer = spawn("irtt", ["server", "-b", `127.0.0.1:${irttPort}`], {
      stdio: "ignore",
    });
    servers.push(irttServer);
    files["irtt.json"] = join(dir, "irtt.json");
    // The server needs a moment to bind; the client retries its handshake meanwhile.
    await sleep(300);
    await run("irtt", [
      "client",
      "-q",
      "-i",
      "50ms",
      "-d",
      "1s",
      "-o",
      files["irtt.json"],
      `127.0.0.1:${irttPort}`,
    ]);

    const sockperfPort = await freePort();
    await serve(
      "sockperf",
      ["server", "--tcp", "-i", "127.0.0.1", "-p", String(sockperfPort)],
      sockperfPort,
    );
    files["sockperf.csv"] = join(dir, "sockperf.csv");
    await run("sockperf", [
      "ping-pong",
      "--tcp",
      "-i",
      "127.0.0.1",
      "-p",
      String(sockperfPort),
      "-t",
      "1",
      "--mps",
      "20",
      "--full-rtt",
      "--full-log",
      files["sockperf.csv"],
    ]);

    file("notes.txt", "dear diary\ntoday, the link was slow\nand the weather fine\n");
    rig = await startRig();
  }, 60_000);

  afterAll(async () => {
    for (const p of servers) if (p.exitCode === null) p.kill();
    await rig?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("shows each file's series with the core's names and units, and one message for prose", async () => {
    const { page, done } = await openPage(rig, "?period=300");
    const names = Object.keys(files);
    await page.setInputFiles(
      "#import",
      names.map((n) => files[n]!),
    );
    // Every file gets a report (the unsupported one too).
    await page.waitForFunction(
      (n) => document.querySelectorAll("#import-report > div").length === n,
      names.length,
      { timeout: 20_000, polling: 50 },
    );
    const rows = await page.$$eval('tr[data-series^="import/"]', (trs) =>
      trs.map((tr) => ({
        label: tr.querySelector("th")?.textContent ?? "",
        last: tr.querySelector("td")?.textContent ?? "",
        count: Number(tr.querySelector("td:nth-of-type(5)")?.textContent),
      })),
    );
    const row = (pattern: RegExp) => {
      const found = rows.filter((r) => pattern.test(r.label));
      expect(found, `${pattern} among ${rows.map((r) => r.label).join(" | ")}`).toHaveLength(1);
      return found[0]!;
    };
    const unitOf = (text: string) => text.replace(/^[-\d.e+]+ /, "");

    // The counts, taken from the same files by other means.
    const text = (name: string) => readFileSync(files[name]!, "utf8");
    const json = (name: string) => JSON.parse(text(name)) as { intervals: unknown[] };
    const near = (shown: string, value: number) =>
      expect(Number.parseFloat(shown) / value).toBeCloseTo(1, 2);

    // iperf3 TCP: the client sent, one point an interval.
    const tcp = row(/^iperf3 bandwidth_up to 127\.0\.0\.1:\d+ \(iperf3-tcp\.json\)$/);
    expect(tcp.count).toBe(json("iperf3-tcp.json").intervals.length);
    expect(unitOf(tcp.last)).toMatch(/^[GM]bit\/s$/);
    // iperf3 UDP -R: received, with jitter and loss (a fraction, shown as %), one point each
    // an interval.
    const udp = (metric: string) =>
      row(new RegExp(`^iperf3 ${metric} to 127\\.0\\.0\\.1:\\d+ \\(iperf3-udp\\.json\\)$`));
    const intervals = json("iperf3-udp.json").intervals.length;
    expect(intervals).toBeGreaterThanOrEqual(4);
    for (const [metric, unit] of [
      ["bandwidth_down", "Mbit/s"],
      ["jitter", "ms"],
      ["loss", "%"],
    ] as const) {
      expect([udp(metric).count, unitOf(udp(metric).last)], metric).toEqual([intervals, unit]);
    }
    // ping: three replies, the last one's RTT in ms.
    const ping = row(/^ping rtt to 127\.0\.0\.1 \(ping\.txt\)$/);
    expect([ping.count, unitOf(ping.last)]).toEqual([3, "ms"]);
    near(
      ping.last,
      Number(
        text("ping.txt")
          .match(/time=([\d.]+) ms/g)!
          .at(-1)!
          .slice(5, -3),
      ),
    );
    // mtr: its one hop's RTT and loss (a report is one point).
    expect(row(/^mtr rtt to 127\.0\.0\.1 \(mtr\.json\)$/).last).toMatch(/ ms$/);
    expect(row(/^mtr loss to 127\.0\.0\.1 \(mtr\.json\)$/).last).toMatch(/ %$/);
    // irtt: a loss point for every round trip, an RTT for every one that came back.
    const trips = (JSON.parse(text("irtt.json")) as { round_trips: { lost: string }[] })
      .round_trips;
    const irtt = (metric: string) =>
      row(new RegExp(`^irtt ${metric} to 127\\.0\\.0\\.1:\\d+ \\(irtt\\.json\\)$`));
    expect(trips.length).toBeGreaterThanOrEqual(10);
    expect([irtt("rtt").count, unitOf(irtt("rtt").last)]).toEqual([
      trips.filter((t) => t.lost === "false").length,
      "ms",
    ]);
    expect([irtt("loss").count, unitOf(irtt("loss").last)]).toEqual([trips.length, "%"]);
    // sockperf: one RTT a sample line of its log.
    const samples = text("sockperf.csv")
      .split("\n")
      .filter((l) => /^\s*\d+\s*,/.test(l));
    const sockperf = row(/^sockperf rtt \(sockperf\.csv\)$/);
    expect(samples.length).toBeGreaterThanOrEqual(5);
    expect([sockperf.count, unitOf(sockperf.last)]).toEqual([samples.length, "ms"]);
    // --full-rtt: the last column is the round trip in µs.
    near(sockperf.last, Number(samples.at(-1)!.split(",").at(-1)) / 1000);

    const report = (await page.textContent("#import-report")) ?? "";
    for (const [file, format] of [
      ["iperf3-tcp.json", "iperf3"],
      ["iperf3-udp.json", "iperf3"],
      ["ping.txt", "ping"],
      ["mtr.json", "mtr"],
      ["irtt.json", "irtt"],
      ["sockperf.csv", "sockperf"],
    ] as const) {
      expect(report).toMatch(
        new RegExp(`${file.replace(".", "\\.")} \\(${format}\\): \\d+ values`),
      );
    }
    // The prose: nothing imported, and the one message naming what is supported, once.
    expect(report).toContain("notes.txt: nothing imported.");
    expect(report.match(/is in no format Nowcast reads/g)).toHaveLength(1);
    expect(report).toMatch(/iperf3 -J \(TCP and UDP\), ping output.*mtr --json, irtt JSON/);
    await done();
  }, 60_000);
});
