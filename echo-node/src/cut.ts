/**
 * Cutting a client off for a limit (too slow, over its byte budget, a closing handshake it
 * never answered, shutdown): a TCP reset, not an ordinary close.
 *
 * An ordinary close leaves in the kernel whatever the socket had queued for the client (up
 * to the send buffer, megabytes) and a FIN behind it, for as long as the client keeps its end
 * open and reads nothing (FIN-WAIT-1, minutes). The socket no longer counts against the
 * client's caps once Node has closed it, so a client that opens downloads and never reads
 * them could pile up memory without bound, past every per-client cap (180 MB from one address
 * in 90 s in a review). A reset (SO_LINGER 0) discards the queue and frees it at once.
 */
import type { Socket } from "node:net";

export function cut(socket: Socket | null | undefined): void {
  if (socket == null || socket.destroyed) return;
  if (socket.writableEnded && !socket.writableFinished && socket.writableLength === 0) {
    // Its FIN is being handed to the kernel (a shutdown, done on the event loop's next turn).
    // libuv refuses to reset a socket then (uv_tcp_close_reset: EINVAL), and Node 20 loses
    // the handle when it does: never closed, no 'close' event, counted for ever. So the reset
    // waits for the FIN to be queued ('finish'); what is queued for the client is dropped
    // all the same.
    socket.once("finish", () => cut(socket));
    return;
  }
  try {
    socket.resetAndDestroy();
  } catch {
    // Not a TCP socket (a test's pipe), or one with no handle left: an ordinary close.
    socket.destroy();
  }
}
