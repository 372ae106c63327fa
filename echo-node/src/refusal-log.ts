/**
 * One line of log per refused client per interval, never a stack trace per request: a hostile
 * client must not be able to flood the operator's log (or disk) by repeating a bad request.
 * Pure apart from the injected writer: time is an argument.
 */

/** How often one address may produce a log line. */
export const REFUSAL_LOG_INTERVAL_MS = 60_000;
/** Addresses remembered at once; beyond this the oldest are forgotten (bounded memory). */
const MAX_REMEMBERED = 4096;

export class RefusalLog {
  /** address → time of its last logged line, in insertion (≈ time) order. */
  private readonly last = new Map<string, number>();
  private suppressed = 0;

  constructor(
    private readonly write: (line: string) => void = (line) => console.error(line),
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
  ) {}

  /** Logs `what` for `address` unless that address was logged within the interval. */
  note(now: number, address: string, what: string): void {
    const previous = this.last.get(address);
    if (previous !== undefined && now - previous < this.intervalMs) {
      this.suppressed++;
      return;
    }
    this.last.delete(address);
    this.last.set(address, now);
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
