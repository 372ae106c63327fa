/**
 * When an upload's bytes arrived, as far as the server can tell from its socket reads
 * (PROTOCOL.md, "Upload bandwidth"). Pure: the caller passes each read's time and length.
 *
 * A read returns at most {@link READ_SIZE} bytes (the buffer libuv asks Node for), so a full
 * read may have left more bytes waiting in the kernel, bytes that arrived before the read's
 * time; a shorter read took everything there was, so every byte read after it arrived after
 * it. The upload's timed span therefore starts at the first short read that carried upload
 * data, and every byte up to the end of that read is left out of the rate (they have no
 * duration the server saw). Starting at the first read instead overstates the rate whenever
 * the server reads late at the start of an upload: at 300 Mbit/s a server woken 5 ms late
 * finds ~190 KB waiting, which its 64 KiB first read leaves mostly in the timed span.
 */

/** The most a socket read returns (libuv's suggested buffer size, which Node uses). */
export const READ_SIZE = 64 * 1024;

export interface ArrivalStart {
  /** Server time of the read the timed span starts at. */
  at: number;
  /** Upload bytes read up to the end of that read: they are not timed. */
  bytes: number;
}

export class Arrivals {
  /** Upload bytes read so far. */
  private seen = 0;
  private first: ArrivalStart | undefined;
  private drained: ArrivalStart | undefined;
  /** Time of the last read that carried upload data (NaN before one). */
  lastAt = NaN;

  /**
   * A socket read at `at` of `length` bytes, `data` of them the upload's (the rest being
   * other messages or framing). `length` undefined: the read's length is not known (an HTTP
   * body's first piece shares its read with the request head), so it proves nothing.
   */
  read(at: number, length: number | undefined, data: number): void {
    if (!(data > 0)) return;
    this.seen += data;
    this.lastAt = at;
    this.first ??= { at, bytes: this.seen };
    if (this.drained === undefined && length !== undefined && length < READ_SIZE) {
      this.drained = { at, bytes: this.seen };
    }
  }

  /**
   * Where the timed span starts: the first short read, or, when none came before the last
   * read (the server was behind all along, or the upload fit in a few reads), the first read.
   * Undefined before any upload data. `bytes` is capped at `expected`.
   */
  start(expected: number): ArrivalStart | undefined {
    const s =
      this.drained !== undefined && this.drained.at < this.lastAt ? this.drained : this.first;
    return s === undefined ? undefined : { at: s.at, bytes: Math.min(s.bytes, expected) };
  }
}
