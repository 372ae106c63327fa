/**
 * Command-line entry: `node echo-node/dist/main.js [options]` (see --help).
 */
import { stat } from "node:fs/promises";
import { networkInterfaces } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError, parseConfig, VERSION, type Config } from "./config.js";
import { descriptorWarning } from "./descriptors.js";
import { duplicateMirrors, MirrorsError, mirrorOrigins, type Mirror } from "./mirrors.js";
import { canonicalOrigin } from "./origin-policy.js";
import { PROTOCOL_VERSION } from "./protocol.js";
import { startEchoNode } from "./server.js";

/**
 * A log whose reader went away (`echo-node | head`, a closed terminal, a logger that died)
 * must not take the server down: Node reports a failed write to stdout or stderr (EPIPE) as an
 * 'error' event, which unhandled is an uncaught exception. The lines are lost; serving goes on.
 */
function survivePipeErrors(): void {
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined);
}

/** What is wrong with the page directory, or undefined when it holds an index.html. */
async function pageProblem(dir: string): Promise<string | undefined> {
  const why = (e: unknown) => (e as NodeJS.ErrnoException).code ?? (e as Error).message;
  let info;
  try {
    info = await stat(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === "ENOENT"
      ? "it does not exist, so only the probes are served"
      : `it cannot be read (${why(e)}), so only the probes are served`;
  }
  if (!info.isDirectory()) return "it is not a directory, so only the probes are served";
  try {
    if ((await stat(join(dir, "index.html"))).isFile()) return undefined;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") {
      return `its index.html cannot be read (${why(e)}), so / shows no page`;
    }
  }
  return "it holds no index.html, so / shows no page";
}

/** The page line: the directory, and a warning when it holds no page. A probes-only mirror
 *  is legitimate (README), so this warns and the server runs. */
async function pageLine(dir: string): Promise<string> {
  const problem = await pageProblem(dir);
  if (problem === undefined) return `  page: ${dir}`;
  return (
    `  page: ${dir} (warning: ${problem}; build the page with \`npm start\` or ` +
    "`npm -w web run build`, or give its directory with --static)"
  );
}

/** The origins allowed besides the page's own, as compared with a request's Origin. */
function allowedLine(config: Config, mirrors: readonly Mirror[]): string | undefined {
  if (config.allowOrigins.includes("*")) return "  other origins allowed: any (--allow-origin '*')";
  const listed = config.allowOrigins.map((o) => canonicalOrigin(o) ?? o);
  const fromMirrors = mirrorOrigins(mirrors).filter((o) => !listed.includes(o));
  const parts = [
    ...(listed.length > 0 ? [listed.join(", ")] : []),
    ...(fromMirrors.length > 0 ? [`${fromMirrors.join(", ")} (mirrors)`] : []),
  ];
  return parts.length > 0 ? `  other origins allowed: ${parts.join(", ")}` : undefined;
}

/** This machine's interface addresses, for a --host that is not one of them. */
function ownAddresses(): string {
  const list = Object.values(networkInterfaces())
    .flatMap((entries) => entries ?? [])
    .map((e) => e.address);
  return list.length > 0 ? list.join(", ") : "none found";
}

/** A failure to listen that is the configuration's fault or the machine's: one line and the
 *  exit status, or undefined for anything else (a bug, reported with its stack). */
function listenFailure(config: Config, e: unknown): [string, number] | undefined {
  const err = e as NodeJS.ErrnoException;
  const host = config.host ?? "";
  if (err.syscall === "getaddrinfo") {
    if (err.code === "ENOTFOUND" || err.code === "EAI_NONAME") {
      return [
        `--host '${host}' does not resolve to an address (${err.code}): give an address of ` +
          "this machine such as 127.0.0.1 or ::1, or a name that resolves to one",
        2,
      ];
    }
    return [`--host '${host}' could not be resolved now (${err.code}): is DNS working?`, 1];
  }
  if (err.code === "EADDRNOTAVAIL") {
    return [
      `--host '${host}' is not an address of this machine (EADDRNOTAVAIL): give one of its ` +
        `addresses (${ownAddresses()}), or leave --host out to listen on all of them`,
      2,
    ];
  }
  if (err.code === "EADDRINUSE") {
    return [
      `cannot listen on port ${config.port}: it is already in use (another echo-node?); ` +
        "pick another with --port or PORT",
      1,
    ];
  }
  if (err.code === "EACCES") {
    return [`cannot listen on port ${config.port}: ${err.message}`, 1];
  }
  return undefined;
}

async function main(): Promise<number> {
  survivePipeErrors();
  let parsed;
  try {
    parsed = parseConfig(process.argv.slice(2), process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`echo-node: ${e.message}`);
      return 2;
    }
    throw e;
  }
  if (parsed.kind === "help") {
    process.stdout.write(parsed.text);
    return 0;
  }
  if (parsed.kind === "version") {
    console.log(`echo-node ${VERSION} (protocol ${PROTOCOL_VERSION})`);
    return 0;
  }
  const { config } = parsed;
  for (const warning of parsed.warnings) console.error(`echo-node: warning: ${warning}`);
  const descriptors = descriptorWarning(config.maxConnections);
  if (descriptors !== undefined) console.error(`echo-node: warning: ${descriptors}`);
  const page = pageLine(resolve(config.staticDir));
  let node;
  try {
    node = await startEchoNode(config);
  } catch (e) {
    if (e instanceof MirrorsError) {
      console.error(`echo-node: ${e.message}`);
      return 2;
    }
    const failure = listenFailure(config, e);
    if (failure === undefined) throw e;
    console.error(`echo-node: ${failure[0]}`);
    return failure[1];
  }
  console.log(`echo-node ${VERSION} listening on ${node.url}`);
  console.log(await page);
  if (node.mirrors.length > 0)
    console.log(`  mirrors: ${node.mirrors.map((m) => m.name).join(", ")}`);
  for (const warning of duplicateMirrors(node.mirrors)) {
    console.error(`echo-node: warning: ${warning}`);
  }
  console.log(
    config.origins.length > 0
      ? `  page origins: ${config.origins.map((o) => canonicalOrigin(o) ?? o).join(", ")}`
      : "  page origins: localhost and this machine's addresses (use --origin for a DNS name)",
  );
  const allowed = allowedLine(config, node.mirrors);
  if (allowed !== undefined) console.log(allowed);
  if (config.trustProxy.length > 0)
    console.log(`  X-Forwarded-For trusted from: ${config.trustProxy.join(", ")}`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(1); // a second Ctrl-C means now
    stopping = true;
    console.log(`echo-node: ${signal}, closing`);
    void node.close().then(() => process.exit(0));
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  return -1;
}

main().then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (e: unknown) => {
    console.error("echo-node: failed to start:", e);
    process.exitCode = 1;
  },
);
