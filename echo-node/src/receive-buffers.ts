/**
 * Bounds what a WebSocket holds for a message it has not completely received.
 *
 * `ws` keeps each socket read of a frame it is still receiving as a separate Buffer until the
 * frame is complete (its receiver's `_buffers`), and each frame of a fragmented message until
 * the message is (`_fragments`). Every Buffer costs a few hundred bytes of bookkeeping however
 * few bytes it holds, so a client that trickles a frame declaring ~1 MiB in 1-byte TCP
 * segments made the server hold ~200 bytes per byte it sent (8 such sockets: +500 MiB).
 *
 * Here runs of small pieces are merged as they arrive: every piece kept is then at least
 * SMALL_PIECE bytes, except for fewer than MAX_SMALL_RUN at the end, so the bookkeeping is a
 * few percent of the bytes held and a 1 MiB message is at most ~320 pieces. Large reads (what
 * a fast client sends) are never copied; a trickled byte is copied at most
 * SMALL_PIECE / MAX_SMALL_RUN times on its way into a full piece.
 *
 * This reaches into `ws` internals (checked at run time: `install` reports whether it could),
 * so `ws`'s own `maxBufferedChunks`/`maxFragments` stay set as a backstop (receiveBackstop).
 */
import type { Socket } from "node:net";
import type { WebSocket } from "ws";

/** Pieces shorter than this are merged with their neighbours. */
export const SMALL_PIECE = 4096;
/** A trailing run of this many small pieces is merged into one. */
export const MAX_SMALL_RUN = 64;

/**
 * Merges the trailing run of small pieces of `pieces` into one, in place, when it has
 * MAX_SMALL_RUN pieces or SMALL_PIECE bytes. Returns whether it merged.
 */
export function compactPieces(pieces: Buffer[]): boolean {
  let start = pieces.length;
  let bytes = 0;
  while (start > 0 && pieces[start - 1]!.length < SMALL_PIECE) {
    start--;
    bytes += pieces[start]!.length;
  }
  const run = pieces.length - start;
  if (run < 2 || (run < MAX_SMALL_RUN && bytes < SMALL_PIECE)) return false;
  pieces.splice(start, run, Buffer.concat(pieces.slice(start), bytes));
  return true;
}

/**
 * `ws` options that refuse (close 1008) a message in more pieces than a legitimate client can
 * produce even without compaction: its largest message in reads of a 512-byte minimum TCP
 * segment (RFC 9293 §3.7.1 lets a peer go down to 536).
 */
export function receiveBackstop(maxMessage: number): {
  maxBufferedChunks: number;
  maxFragments: number;
} {
  const pieces = Math.ceil(maxMessage / 512) + MAX_SMALL_RUN;
  return { maxBufferedChunks: pieces, maxFragments: pieces };
}

interface ReceiverInternals {
  _buffers?: unknown;
  _fragments?: unknown;
}

/**
 * Compacts `ws`'s pieces after each socket read (the listener runs after ws's own, which
 * consumed what it could). Returns false, and does nothing, if this `ws` version keeps its
 * pieces elsewhere.
 */
export function install(ws: WebSocket, socket: Socket): boolean {
  const receiver = (ws as unknown as { _receiver?: ReceiverInternals })._receiver;
  if (!Array.isArray(receiver?._buffers) || !Array.isArray(receiver._fragments)) return false;
  socket.on("data", () => {
    // Read afresh each time: ws replaces the fragments array when a message completes.
    compactPieces(receiver._buffers as Buffer[]);
    compactPieces(receiver._fragments as Buffer[]);
  });
  return true;
}
