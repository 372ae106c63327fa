/**
 * The page's accuracy on emulated links (netns.ts): a real echo-node in a network
 * namespace behind tbf, the real page in Debian's Chromium in the root namespace, and the
 * reference tools through the same link in the same run.
 * - The download (automatic size, median of 10 probes once the size and the stream count have
 *   settled) within ±5 % of `iperf3 -R` (data flows server → browser as in the page's
 *   download; median of three 2-second runs), and the upload (timed by the server's receive
 *   times) within ±5 % of `iperf3` (browser → server), at each rate of a sweep: 20 and 300
 *   Mbit/s here, 10 Mbit/s to 1 Gbit/s in `npm run bench` (NOWCAST_E2E_RATES). Both go
 *   over fetch, as the page does by default (engine/plan.ts UPLOAD_KEY): over WebSocket the
 *   upload read 0.81-0.88 of iperf3 at 300 Mbit/s and the download 0.90 at 500 Mbit/s and
 *   0.46 at 1 Gbit/s, where fetch held within 2.5 %. Chromium moves a WebSocket's messages
 *   between the page and its network process through a pipe of ~128 KB that the page's
 *   thread must refill or drain, and on a path of little delay the kernel's buffers are small
 *   too, so every late wake-up of either thread leaves the link idle; a fetch body or
 *   response is moved by the network process itself.
 * - The same on links with a delay (`nowcast delay` relays in front of echo-node and of
 *   iperf3), in `npm run bench` (DELAYED): a long path is where a probe sized for a quarter
 *   second lasts less than the round trip.
 * - RTT (the page's WebSocket RTT series, median of 10 probes: echo-node's timed pings,
 *   engine/measure/echo.ts) against `sockperf ping-pong --tcp --full-rtt` on the bare veth and
 *   on a link with 40 ms added by `nowcast delay` relays (tbf has no delay): asserted within
 *   the goal ±(0.3 ms + 3 %) of sockperf's median in both.
 * Root only (namespaces), with iperf3, sockperf and the `nowcast` binary; skipped with a
 * message that says what is missing otherwise. Figures are printed side by side.
 */
import { closeSync, openSync, readdirSync, writeSync } from "node:fs";
import { getPriority, loadavg, setPriority } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { launchChromium, missing, startRig, type Rig } from "./harness.js";
import { Link, netnsMissing, nowcastMissing, runRoot } from "./netns.js";

const why = missing() ?? netnsMissing(["iperf3", "sockperf", "ss"]);
if (why !== undefined) console.warn(`e2e: skipping the emulated-link accuracy tests: ${why}`);
const whyNoDelay = why ?? nowcastMissing();
if (why === undefined && whyNoDelay !== undefined) {
  console.warn(`e2e: skipping the RTT accuracy test on a delayed link: ${whyNoDelay}`);
}

/** What the page keeps of a measurement (its IndexedDB history rows). */
interface Kept {
  value?: number;
  status: string;
  probe?: { payload_bytes?: number; streams?: number; raw_ms?: number };
}

/** The records of `key` the page has kept, in order (read from its IndexedDB history). */
function kept(page: Page, key: string): Promise<Kept[]> {
  return page.evaluate(async (key) => {
    const db = await new Promise<IDBDatabase>((resolve, reject) => {
      const req = indexedDB.open("nowcast");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error ?? new Error("indexedDB.open failed"));
    });
    try {
      const all = await new Promise<{ key: string; record: Kept }[]>((resolve, reject) => {
        const req = db.transaction("records").objectStore("records").getAll();
        req.onsuccess = () => resolve(req.result as { key: string; record: Kept }[]);
        req.onerror = () => reject(req.error ?? new Error("getAll failed"));
      });
      return all.filter((r) => r.key === key).map((r) => r.record);
    } finally {
      db.close();
    }
  }, key);
}

/** Waits until the graph of `key` has at least `n` measurements (the history exists then). */
async function measured(page: Page, key: string, n: number, timeout: number): Promise<void> {
  await page.waitForFunction(
    ([key, n]) =>
      Number(
        document.querySelector<HTMLElement>(`figure[data-series="${key}"]`)?.dataset.measurements ??
          0,
      ) >= Number(n),
    [key, String(n)] as const,
    { timeout, polling: 100 },
  );
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Asks the kernel (PM QoS) for no idle-exit latency while the returned descriptor is open, as
 * the Rust accuracy test does: probes a second apart find the cores idle, and waking one from
 * a deep idle state costs tens of µs per hop, of which the page's path has many.
 */
function stayAwake(): number | undefined {
  try {
    const fd = openSync("/dev/cpu_dma_latency", "w");
    writeSync(fd, Buffer.alloc(4)); // an int32 0: no latency allowed
    return fd;
  } catch (e) {
    console.warn(`e2e: cannot hold the cores awake: ${(e as Error).message}`);
    return undefined;
  }
}

/**
 * Gives every thread of this process's Chromium the test's priority. Chromium sets its own
 * threads' nice values (renderers at 5, most threads at 0), so the inherited one does not
 * hold; the page's probes cross half a dozen of its threads, each woken late on a loaded
 * machine. Threads started later keep Chromium's values: called again when it matters.
 */
async function prioritizeBrowser(): Promise<void> {
  const table = await runRoot(["ps", "-e", "-o", "pid=,ppid=,comm="]);
  const children = new Map<number, number[]>();
  const names = new Map<number, string>();
  for (const line of table.trim().split("\n")) {
    const [pid, ppid, comm] = line.trim().split(/\s+/);
    children.set(Number(ppid), [...(children.get(Number(ppid)) ?? []), Number(pid)]);
    names.set(Number(pid), comm ?? "");
  }
  const mine: number[] = [];
  for (const todo = [process.pid]; todo.length > 0;) {
    for (const c of children.get(todo.pop()!) ?? []) {
      todo.push(c);
      if (names.get(c)?.startsWith("chrom")) mine.push(c);
    }
  }
  const threads = mine.flatMap((pid) => {
    try {
      return readdirSync(`/proc/${pid}/task`);
    } catch {
      return []; // gone meanwhile
    }
  });
  if (threads.length > 0) {
    await runRoot(["renice", "-n", String(NICE), "-p", ...threads]).catch(() => undefined);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The automatic size's target duration (the core's transfer::AUTO_TARGET_MS). */
const AUTO_TARGET_MS = 250;
/** How many probes the comparison takes, after the automatic size has settled. */
const PROBES = 10;
/** RTT rounds left out at the start of the page. */
const WARM_UP = 3;
/** The scheduling priority of the processes under test (nice value, -20..19). */
const NICE = -10;
/**
 * The link rates the bandwidth comparison sweeps (Mbit/s): the two ends of the short sweep in
 * `npm test` (a middle rate took 27 s of the 20-minute budget and told nothing the ends did
 * not), the full one from 10 Mbit/s to 1 Gbit/s in `npm run bench` (NOWCAST_E2E_RATES=10,...,1000).
 */
const RATES = (process.env.NOWCAST_E2E_RATES ?? "20,300")
  .split(",")
  .map((r) => Number(r.trim()))
  .filter((r) => r > 0);
/**
 * Links with a delay for the bandwidth comparison (Mbit/s:one-way ms), through `nowcast delay`
 * relays: in `npm run bench` (which sets NOWCAST_E2E_RATES), or as NOWCAST_E2E_DELAYED says.
 * On a long path a probe sized for a quarter second lasted less than the round trip, which
 * the rate then kept (the core's transfer::RTT_TIMES): 100 Mbit/s read 29 Mbit/s with 200 ms added
 * and 1.7 Mbit/s with 300 ms, 7 Mbit/s 3.3 with 160 ms.
 */
const DELAYED = (
  process.env.NOWCAST_E2E_DELAYED ??
  (process.env.NOWCAST_E2E_RATES === undefined ? "" : "7:80,100:150")
)
  .split(",")
  .map((d) => d.split(":").map(Number) as [number, number])
  .filter(([mbit, oneWay]) => mbit > 0 && oneWay > 0);
/** The RTT's goal (issue 12): the page within ±(RTT_ABS_MS + RTT_REL · sockperf's RTT) of
 *  sockperf. An echo timed on the page missed it by ~1 ms on the bare veth (the browser's
 *  hops between the page's thread and its network process); the timed pings leave those out. */
const RTT_ABS_MS = 0.3;
const RTT_REL = 0.03;
/** The fixed one-way delay of the delayed link (ms): a round trip gains twice this. */
const DELAY_MS = 20;

describe.skipIf(why !== undefined)("the page on emulated links", () => {
  let rig: Rig;
  const links: Link[] = [];
  const closers: (() => Promise<void>)[] = [];
  const nice = getPriority();
  let awake: number | undefined;
  beforeAll(async () => {
    // Everything this file starts (Chromium, the servers, iperf3, sockperf) inherits a
    // higher priority: on a shared two-core machine the other work would otherwise decide
    // how late a woken thread runs, for the page and the reference tools alike.
    setPriority(NICE);
    awake = stayAwake();
    // The rig's own loopback echo-node is not used: only its Chromium.
    rig = await startRig();
  });
  afterAll(async () => {
    for (const c of closers) await c().catch(() => undefined);
    for (const l of links) await l.close();
    await rig?.close();
    setPriority(nice);
    if (awake !== undefined) closeSync(awake);
  });

  /**
   * The page's measurements of `key` once the last PROBES were all on one stream count and
   * each long enough to be timed (at least half the automatic size's target duration): the
   * size follows the forecast, so it settles after a few rounds. (Their sizes may differ: a
   * rate near a power of two's boundary flips the size between two that both last long
   * enough, as a loaded machine's rates waver.)
   */
  async function settled(page: Page, key: string): Promise<Kept[]> {
    await measured(page, key, 1, 20_000);
    const until = Date.now() + 90_000;
    for (;;) {
      const ok = (await kept(page, key)).filter((r) => r.status === "ok");
      const last = ok.slice(-PROBES);
      const same = (r: Kept) =>
        (r.probe?.raw_ms ?? 0) >= AUTO_TARGET_MS / 2 &&
        r.probe?.streams === last[0]?.probe?.streams;
      if (last.length === PROBES && last.every(same)) return last;
      if (Date.now() > until) {
        throw new Error(
          `${key}: the probe size did not settle: ${JSON.stringify(ok.map((r) => r.probe))}`,
        );
      }
      await sleep(500);
    }
  }

  /**
   * Three 2-second iperf3 runs to the namespace's server (`-R`: server → us). Through a
   * `nowcast delay` relay (`relay`: its port, and the link's rate): each run 3 seconds with
   * the first left out (the relay's delay is in the receiver's first second: 80 ms each way
   * read 8 % low over 2 s), `-R` paced at twice the link's rate (the relay reads the sender's
   * loopback leg without bound: 2.2 GB in 2 s at 37 Mbit/s, which it then sends for minutes),
   * and a second between runs (iperf3's server is busy until the delayed close reaches it).
   */
  async function iperf3(
    link: Link,
    reverse: boolean,
    relay?: { port: number; mbit: number },
  ): Promise<number[]> {
    const runs: number[] = [];
    for (let tries = 0; runs.length < 3 && tries < 6; tries++) {
      const port = String(relay?.port ?? 5201);
      const args = ["iperf3", "-c", link.serverIp, "-p", port, "-J"];
      args.push(...(relay === undefined ? ["-t", "2"] : ["-t", "3", "-O", "1"]));
      if (reverse) args.push("-R", ...(relay === undefined ? [] : ["-b", `${2 * relay.mbit}M`]));
      if (relay !== undefined) await sleep(1000);
      const out = await runRoot(args, 20_000);
      const j = JSON.parse(out.slice(0, out.lastIndexOf("}") + 1)) as {
        error?: string;
        end?: { sum_received?: { bits_per_second: number } };
      };
      const bps = j.end?.sum_received?.bits_per_second;
      if (bps === undefined && relay === undefined) throw new Error(`iperf3: ${j.error}`);
      if (bps !== undefined) runs.push(bps / 1e6);
    }
    return runs;
  }

  /** Prints the page's figure next to iperf3's; whether it is within ±`bound` of it. */
  function compare(what: string, probes: Kept[], runs: number[], bound: number): boolean {
    const ours = median(probes.map((r) => r.value!));
    const theirs = median(runs);
    const p = probes[0]!.probe!;
    const sizes = [...new Set(probes.map((r) => r.probe?.payload_bytes))].join("/");
    console.log(
      `e2e: ${what}: page ${ours.toFixed(2)} Mbit/s (median of ${PROBES} probes of ` +
        `${sizes} B on ${p.streams} stream(s): ` +
        `${probes.map((r) => r.value!.toFixed(1)).join(" ")}), iperf3 ${theirs.toFixed(2)} ` +
        `(${runs.map((r) => r.toFixed(1)).join(" ")}), ratio ${(ours / theirs).toFixed(4)}`,
    );
    return Math.abs(ours - theirs) <= bound * theirs;
  }

  for (const mbit of RATES) {
    it(`reads the download within ±5 % of iperf3 -R and the upload within ±5 % of iperf3 at ${mbit} Mbit/s`, async () => {
      // Both directions shaped alike: downloads on the namespace's egress, uploads on ours.
      const link = new Link(mbit, mbit);
      links.push(link);
      const url = await link.echoNode();
      link.spawn(["iperf3", "-s", "-B", link.serverIp, "-p", "5201"]);
      await link.listening(5201);

      const errors: string[] = [];
      /** The page over `transport` until `keys` have settled; their probes. */
      const measure = async (transport: string, keys: string[]) => {
        const page = await rig.newPage();
        page.on("pageerror", (e) => errors.push(e.message));
        page.on("console", (m) => {
          if (m.text().includes("pretest")) console.log(`e2e: @${mbit} Mbit/s ${m.text()}`);
        });
        // A budget that lets the automatic size probe every round (the default budget spaces
        // probes long enough to be timed minutes apart on a fast link).
        await page.goto(`${url}/?period=1&size=auto&budget=1000000&transport=${transport}`);
        await prioritizeBrowser();
        const out = [];
        for (const key of keys) out.push(await settled(page, key));
        await page.context().close();
        return out;
      };
      // The page as it opens (transport=websocket): its transfers go over fetch.
      const [down, up] = await measure("websocket", ["bandwidth_down/http", "bandwidth_up/http"]);

      const reverse = await iperf3(link, true);
      const ok = {
        down: compare(`download @${mbit} Mbit/s vs iperf3 -R`, down!, reverse, 0.05),
        up: compare(`upload @${mbit} Mbit/s vs iperf3`, up!, await iperf3(link, false), 0.05),
      };
      expect(errors).toEqual([]);
      expect(ok).toEqual({ down: true, up: true });
    }, 240_000);
  }

  for (const [mbit, oneWay] of DELAYED) {
    it.skipIf(whyNoDelay !== undefined)(
      `reads the download within ±5 % of iperf3 -R and the upload within ±5 % of iperf3 at ${mbit} Mbit/s with ${2 * oneWay} ms added`,
      async () => {
        const link = new Link(mbit, mbit);
        links.push(link);
        const node = await link.echoNode();
        link.spawn(["iperf3", "-s", "-B", link.serverIp, "-p", "5201"]);
        await link.listening(5201);
        // The page and iperf3 each behind a relay in the namespace, as in the RTT test.
        const front = await link.delay(9001, `${link.serverIp}:${new URL(node).port}`, oneWay);
        await link.delay(9002, `${link.serverIp}:5201`, oneWay);
        const page = await rig.newPage();
        const errors: string[] = [];
        page.on("pageerror", (e) => errors.push(e.message));
        await page.goto(`http://${front}/?period=1&size=auto&budget=1000000&transport=websocket`);
        await prioritizeBrowser();
        const down = await settled(page, "bandwidth_down/http");
        const up = await settled(page, "bandwidth_up/http");
        await page.context().close();
        const relay = { port: 9002, mbit };
        const what = `@${mbit} Mbit/s +${2 * oneWay} ms`;
        const ok = {
          down: compare(
            `download ${what} vs iperf3 -R`,
            down,
            await iperf3(link, true, relay),
            0.05,
          ),
          up: compare(`upload ${what} vs iperf3`, up, await iperf3(link, false, relay), 0.05),
        };
        expect(errors).toEqual([]);
        expect(ok).toEqual({ down: true, up: true });
      },
      240_000,
    );
  }

  for (const oneWay of [0, DELAY_MS]) {
    it.skipIf(oneWay > 0 ? whyNoDelay !== undefined : why !== undefined)(
      `reads the RTT against sockperf with ${2 * oneWay} ms added (goal ±(${RTT_ABS_MS} ms + ${RTT_REL * 100} %))`,
      async () => {
        const link = new Link(undefined);
        links.push(link);
        const node = await link.echoNode();
        const nodePort = new URL(node).port;
        link.spawn(["sockperf", "server", "--tcp", "-i", link.serverIp, "-p", "11111"]);
        await link.listening(11111);
        // With a delay, one relay in front of each server, in the namespace: the page (and
        // everything it loads) and sockperf cross the same kind of delay line. Without one,
        // both reach their servers directly over the veth.
        const front =
          oneWay > 0
            ? await link.delay(9001, `${link.serverIp}:${nodePort}`, oneWay)
            : `${link.serverIp}:${nodePort}`;
        const sockperf =
          oneWay > 0
            ? await link.delay(9011, `${link.serverIp}:11111`, oneWay)
            : `${link.serverIp}:11111`;

        // The page is cross-origin isolated (5 µs timers) only in a secure context: https,
        // or loopback. This one is served from the namespace's address over http, so this
        // browser is told to treat that origin as secure, as a page over https would be.
        const browser = await launchChromium([
          `--unsafely-treat-insecure-origin-as-secure=http://${front}`,
        ]);
        closers.push(() => browser.close());
        const page = await (await browser.newContext()).newPage();
        const errors: string[] = [];
        page.on("pageerror", (e) => errors.push(e.message));
        await page.goto(`http://${front}/?period=1`);
        expect(await page.evaluate(() => crossOriginIsolated)).toBe(true);
        const key = "rtt/websocket";
        // The first rounds run while the page is still starting (compiling, drawing its graphs):
        // they are left out, as a warm-up. Then sockperf runs while the page takes its probes,
        // so that both are measured in the same seconds of a shared machine.
        await measured(page, key, WARM_UP, 30_000);
        await prioritizeBrowser();
        const from = (await kept(page, key)).length;
        const [host, port] = sockperf.split(":") as [string, string];
        const reference = runRoot(
          [
            ...["sockperf", "ping-pong", "--tcp", "--full-rtt"],
            ...["-i", host, "-p", port, "-t", String(PROBES)],
          ],
          30_000,
        );
        let all = await kept(page, key);
        for (const until = Date.now() + 30_000; all.length < from + PROBES;) {
          if (Date.now() > until) throw new Error(`only ${all.length - from} RTT probes in 30 s`);
          await sleep(250);
          all = await kept(page, key);
        }
        const rtts = all.slice(from, from + PROBES).filter((r) => r.status === "ok");
        await page.context().close();
        const ours = median(rtts.map((r) => r.value!));
        const out = await reference;
        const m = /percentile 50\.000 =\s*([\d.]+)/.exec(out);
        if (m === null) throw new Error(`no median in sockperf's output:\n${out}`);
        const theirs = Number(m[1]) / 1000;
        console.log(
          `e2e: rtt +${2 * oneWay} ms: page ${ours.toFixed(3)} ms (median of ${rtts.length}: ` +
            `${rtts.map((r) => r.value!.toFixed(2)).join(" ")}) sockperf --tcp ${theirs.toFixed(3)} ms, ` +
            `difference ${(ours - theirs).toFixed(3)} ms (load average ${loadavg()[0]!.toFixed(2)})`,
        );
        expect(errors).toEqual([]);
        expect(rtts.length).toBeGreaterThanOrEqual(PROBES / 2);
        expect(Math.abs(ours - theirs)).toBeLessThanOrEqual(RTT_ABS_MS + RTT_REL * theirs);
      },
      90_000,
    );
  }
});
