/**
 * The open-descriptor limit against what echo-node's connection cap may need. Node raises
 * its soft limit to the hard one as it starts; echo-node says when even that would stop it
 * below `--max-connections`: each connection is a descriptor, and up to twice the cap may be
 * open (the cap counts WebSockets and HTTP probes; idle keep-alive sockets come on top).
 */
import { readFileSync } from "node:fs";

/** The soft and hard limits on open files in a `/proc/PID/limits` text; undefined for
 *  "unlimited" or a text without the line. */
export function openFileLimits(limits: string): { soft: number; hard: number } | undefined {
  const line = limits.split("\n").find((l) => l.startsWith("Max open files"));
  const [soft, hard] = (line ?? "")
    .slice("Max open files".length)
    .trim()
    .split(/\s+/)
    .map((w) => Number(w));
  if (!Number.isSafeInteger(soft) || !Number.isSafeInteger(hard)) return undefined;
  return { soft: soft!, hard: hard! };
}

/** What to tell the operator when the soft limit is under what `maxConnections` may need,
 *  or undefined when it is not (or the limits cannot be read: not Linux). */
export function descriptorWarning(
  maxConnections: number,
  limits: string | null = readLimits(),
): string | undefined {
  const l = limits === null ? undefined : openFileLimits(limits);
  const needed = 2 * maxConnections + 64;
  if (l === undefined || l.soft >= needed) return undefined;
  const raise =
    l.hard >= needed
      ? `raise it before starting echo-node (\`ulimit -n ${needed}\`; LimitNOFILE= in a systemd unit)`
      : `the hard limit is ${l.hard} (\`ulimit -Hn\`): raise both (LimitNOFILE= in a systemd unit)`;
  return (
    `open files are limited to ${l.soft} (\`ulimit -n\`), fewer than the ${needed} that ` +
    `--max-connections ${maxConnections} may need (two a connection): clients beyond it ` +
    `are refused at accept. ${raise[0]!.toUpperCase()}${raise.slice(1)}, or lower --max-connections`
  );
}

/** This process's limits; null where there is no /proc (not Linux). */
function readLimits(): string | null {
  try {
    return readFileSync("/proc/self/limits", "utf8");
  } catch {
    return null;
  }
}
