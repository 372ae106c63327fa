/**
 * Counts the WebSocket frames a client sends that its message token does not pay for, from
 * the bytes of its socket (RFC 6455 §5.2), so that the message rate bounds the work of parsing
 * frames and not only of handling messages.
 *
 * A message may be sent in many frames (fragments), and `ws` parses each: without this, a
 * message of 2,000 empty continuation frames (6 bytes each) cost one token, and one client
 * within its rate kept a core busy (a review measured everyone else's echo RTT going from
 * 0.7 ms to 150–300 ms with two such clients). A continuation frame that carries at least
 * FREE_FRAGMENT_BYTES is paid for by its bytes (the byte budget bounds how many of those a
 * client can send); a shorter one takes a message token like a message. Browsers split only
 * large messages, into frames of tens of kilobytes (Chromium sends a 1 MiB message as about
 * 11 frames of 64–131 KB), so a page never pays more than a token or so for this.
 *
 * Only headers are read: each frame costs a few comparisons, and payload bytes are skipped.
 * Pure: bytes in, a count out.
 */

/** A continuation frame shorter than this takes a message token. */
export const FREE_FRAGMENT_BYTES = 4096;

const OPCODE_CONTINUATION = 0x0;

export class FrameCounter {
  /** The header of the frame being read, when it spans socket reads (at most 14 bytes). */
  private readonly header = Buffer.alloc(14);
  private have = 0;
  /** Payload bytes of the current frame still to skip. */
  private skip = 0;

  /** The frames in `chunk` (the next bytes of the stream) that take a message token. */
  count(chunk: Buffer): number {
    let charged = 0;
    let at = 0;
    const end = chunk.length;
    while (at < end) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, end - at);
        this.skip -= n;
        at += n;
        continue;
      }
      // The header, a byte at a time (at most 14): 2 bytes, then the extended length and the
      // mask they announce.
      this.header[this.have++] = chunk[at++]!;
      if (this.have < 2) continue;
      const len7 = this.header[1]! & 0x7f;
      const size = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (this.header[1]! & 0x80 ? 4 : 0);
      if (this.have < size) continue;
      const payload =
        len7 === 126
          ? this.header.readUInt16BE(2)
          : len7 === 127
            ? Number(this.header.readBigUInt64BE(2))
            : len7;
      if ((this.header[0]! & 0x0f) === OPCODE_CONTINUATION && payload < FREE_FRAGMENT_BYTES) {
        charged++;
      }
      this.have = 0;
      this.skip = payload;
    }
    return charged;
  }
}
