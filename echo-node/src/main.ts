/**
 * Command-line entry: `node echo-node/dist/main.js [options]` (see --help).
 */
import { ConfigError, parseConfig } from "./config.js";
import { descriptorWarning } from "./descriptors.js";
import { MirrorsError } from "./mirrors.js";
import { PROTOCOL_VERSION } from "./protocol.js";
import { SERVER_VERSION, startEchoNode } from "./server.js";

async function main(): Promise<number> {
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
    console.log(`echo-node ${SERVER_VERSION} (protocol ${PROTOCOL_VERSION})`);
    return 0;
  }
  const { config } = parsed;
  for (const warning of parsed.warnings) console.error(`echo-node: warning: ${warning}`);
  const descriptors = descriptorWarning(config.maxConnections);
  if (descriptors !== undefined) console.error(`echo-node: warning: ${descriptors}`);
  let node;
  try {
    node = await startEchoNode(config);
  } catch (e) {
    if (e instanceof MirrorsError) {
      console.error(`echo-node: ${e.message}`);
      return 2;
    }
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL") {
      const why =
        code === "EADDRINUSE"
          ? "it is already in use (another echo-node?); pick another with --port or PORT"
          : (e as Error).message;
      console.error(`echo-node: cannot listen on port ${config.port}: ${why}`);
      return 1;
    }
    throw e;
  }
  console.log(`echo-node ${SERVER_VERSION} listening on ${node.url}`);
  console.log(`  page: ${config.staticDir}`);
  if (node.mirrors.length > 0)
    console.log(`  mirrors: ${node.mirrors.map((m) => m.name).join(", ")}`);
  console.log(
    config.origins.length > 0
      ? `  page origins: ${config.origins.join(", ")}`
      : "  page origins: localhost and this machine's addresses (use --origin for a DNS name)",
  );
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
