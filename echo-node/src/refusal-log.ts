/**
 * One line of log per refused client per interval, never a stack trace per request: a hostile
 * client must not be able to flood the operator's log (or disk) by repeating a bad request.
 * Pure apart from the injected writer: time is an argument.
 */

/** How often one client may produce a log line. */
export const REFUSAL_LOG_INTERVAL_MS = 60_000;
/** Clients remembered at once; beyond this the oldest are forgotten (bounded memory). */
const MAX_REMEMBERED = 4096;

export class RefusalLog {
  /** group → time of its last logged line, in insertion (≈ time) order. */
  private readonly last = new Map<string, number>();
  private suppressed = 0;

  constructor(
    private readonly write: (line: string) => void = (line) => console.error(line),
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
  ) {}

  /**
   * Logs `what` for `address` unless its `group` (the client it belongs to: by default the
   * address itself) was logged within the interval. What varies with the request (a path, an
   * origin) is never part of the group, so a client cannot get a line per request by varying it.
   */
  note(now: number, address: string, what: string, group = address): void {
    const previous = this.last.get(group);
    if (previous !== undefined && now - previous < this.intervalMs) {
      this.suppressed++;
      return;
    }
    this.last.delete(group);
    this.last.set(group, now);
    if (this.last.size > MAX_REMEMBERED) {
      const oldest = this.last.keys().next().value;
      if (oldest !== undefined) this.last.delete(oldest);
    }
    const more = this.suppressed > 0 ? ` (${this.suppressed} similar lines suppressed)` : "";
    this.suppressed = 0;
    this.write(`echo-node: refused ${address}: ${what}${more}`);
  }
}

/** A short, printable excerpt of client-controlled text for a log line. */
export function excerpt(text: string | undefined, max = 80): string {
  if (text === undefined) return "(none)";
  const clean = text.slice(0, max).replace(/[^\x20-\x7e]/g, "?");
  return JSON.stringify(text.length > max ? clean + "…" : clean);
}
