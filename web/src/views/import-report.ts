// What the import report says of a file (files-view.ts), apart from the DOM: whether its text
// can be measurements at all before it goes to the core's reader, and a read file's summary
// and details.

import type { ImportedEvent } from "../messages";

/** How much of a file's start is looked at for bytes that are not text. */
const SNIFF_CHARS = 65_536;
/** Characters that no text file has (undecodable bytes, control characters) beyond this share
 *  of its start: it is not text. */
const ODD_SHARE = 0.01;

/**
 * Why a file's text cannot hold measurements, said before any reader sees it (a binary file's
 * bytes, echoed back in a reader's message, are noise): empty, or not UTF-8 text (a NUL, or
 * more than ODD_SHARE of its start undecodable or control characters). Undefined when it may.
 */
export function unreadable(text: string): string | undefined {
  // (A search, not trim(): that would copy a file of megabytes for one character.)
  if (!/\S/.test(text)) return "the file is empty";
  const head = text.slice(0, SNIFF_CHARS);
  let odd = 0;
  for (let i = 0; i < head.length; i++) {
    const c = head.charCodeAt(i);
    if (c === 0) return NOT_TEXT;
    if (c === 0xfffd || (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0c && c !== 0x0d)) odd++;
  }
  return odd > ODD_SHARE * head.length ? NOT_TEXT : undefined;
}

const NOT_TEXT =
  "it is not UTF-8 text (a binary file, or text in another encoding); measurement files are " +
  "text: NDJSON records, CSV, or a tool's output";

/** "1 line", "4 lines". */
const lines = (n: number) => `${n} line${n === 1 ? "" : "s"}`;

/**
 * A read file's report: the summary line, its details (the reader's notes, then each refused
 * line with its field and why), and whether it is a problem (nothing imported, or lines
 * refused). Notes alone (records without a value, values left out by the limits) are told
 * but are not a problem: what the file holds was imported.
 */
export function importSummary(
  ev: Pick<ImportedEvent, "file" | "format" | "series" | "errors" | "errorCount" | "notes">,
): { summary: string; details: string[]; problem: boolean } {
  const kept = ev.series.reduce((n, s) => n + s.points.length, 0);
  const refused = ev.errors.map(
    (e) => `line ${e.line}${e.field === undefined ? "" : `, ${e.field}`}: ${e.message}`,
  );
  if (ev.errorCount > ev.errors.length) {
    refused.push(`… and ${ev.errorCount - ev.errors.length} more`);
  }
  // A file in no supported format: the core's one message, which names what is, comes as
  // the first note.
  const summary =
    ev.series.length === 0
      ? `${ev.file}: nothing imported`
      : `${ev.file} (${ev.format}): ${kept} values in ${ev.series.length} series`;
  return {
    summary: summary + (ev.errorCount === 0 ? "." : `; ${lines(ev.errorCount)} refused:`),
    details: [...ev.notes, ...refused],
    problem: ev.errorCount > 0 || ev.series.length === 0,
  };
}
