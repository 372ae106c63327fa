/**
 * One line of log per refused client per kind of refusal per interval, never a stack trace per
 * request: a hostile client must not be able to flood the operator's log (or disk) by repeating
 * a bad request. The lines left out are counted for that client and that kind only, and the
 * count is written with that client's next line of that kind, or by `flush` once the interval
 * is over: never on a line about another client, whom the operator would then blame.
 * Pure apart from the injected writer: time is an argument.
 */

/** How often one client may produce a log line of one kind. */
export const REFUSAL_LOG_INTERVAL_MS = 60_000;
/** Clients (and kinds) remembered at once; beyond this the oldest are forgotten (bounded
 *  memory; what they had left out is then not counted). */
const MAX_REMEMBERED = 4096;

interface Group {
  /** When its last line was written. */
  last: number;
  /** Lines left out since. */
  suppressed: number;
  /** The address and text of the latest line left out, for `flush`. */
  address: string;
  what: string;
}

export class RefusalLog {
  /** group and kind → what was logged, in insertion (≈ time) order. */
  private readonly groups = new Map<string, Group>();

  constructor(
    private readonly write: (line: string) => void = (line) => console.error(line),
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
  ) {}

  /**
   * Logs `what` for `address` unless its `group` (the client it belongs to: by default the
   * address itself) had a line of the same `kind` (a limit's name, say) within the interval.
   * What varies with the request (a path, an origin) is never part of the group or the kind,
   * so a client cannot get a line per request by varying it.
   */
  note(now: number, address: string, what: string, group = address, kind = ""): void {
    const key = `${group}\n${kind}`;
    const known = this.groups.get(key);
    if (known !== undefined && now - known.last < this.intervalMs) {
      known.suppressed++;
      known.address = address;
      known.what = what;
      return;
    }
    this.groups.delete(key);
    this.groups.set(key, { last: now, suppressed: 0, address, what });
    if (this.groups.size > MAX_REMEMBERED) {
      const oldest = this.groups.keys().next().value;
      if (oldest !== undefined) this.groups.delete(oldest);
    }
    this.line(address, what, known?.suppressed ?? 0);
  }

  /**
   * For each client and kind whose interval is over: writes the last line it had left out,
   * with the count of the others, or forgets it if there were none. Called now and then, so
   * that what a client that stops had left out is still reported, and so that memory holds
   * only the clients of the last interval.
   */
  flush(now: number): void {
    for (const [key, g] of this.groups) {
      if (now - g.last < this.intervalMs) continue;
      this.groups.delete(key);
      if (g.suppressed === 0) continue;
      this.groups.set(key, { last: now, suppressed: 0, address: g.address, what: g.what });
      this.line(g.address, g.what, g.suppressed - 1);
    }
  }

  private line(address: string, what: string, suppressed: number): void {
    const more = suppressed > 0 ? ` (${suppressed} similar lines from this client suppressed)` : "";
    this.write(`echo-node: refused ${address}: ${what}${more}`);
  }
}

/** A short, printable excerpt of client-controlled text for a log line. */
export function excerpt(text: string | undefined, max = 80): string {
  if (text === undefined) return "(none)";
  const clean = text.slice(0, max).replace(/[^\x20-\x7e]/g, "?");
  return JSON.stringify(text.length > max ? clean + "…" : clean);
}
