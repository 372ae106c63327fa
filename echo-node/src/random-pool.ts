/**
 * Incompressible bytes for download probes without generating them per request. The pool is
 * filled once with `crypto.randomFillSync` (a few milliseconds at start-up) and sent by
 * reference: `ws` and `http` write a Buffer's memory directly, so serving a download costs no
 * copy and no random generation. Blocks are chosen at random, so a compressor in the path
 * would need a window larger than a block (1 MiB) to find repetition; probe responses also
 * carry `Cache-Control: no-transform` so that well-behaved proxies do not try.
 */
import { randomFillSync, randomInt } from "node:crypto";
import { MAX_DOWNLOAD_CHUNK, MSG } from "./protocol.js";

const BLOCKS = 8;

export class RandomPool {
  /** Each block is a complete DOWNLOAD_DATA message of the largest size: type byte, then
   *  random bytes. A smaller message is a prefix of a block, hence still zero-copy. */
  private readonly blocks: Buffer[] = [];
  private next = randomInt(BLOCKS);

  constructor(readonly blockSize = MAX_DOWNLOAD_CHUNK) {
    for (let i = 0; i < BLOCKS; i++) {
      const block = Buffer.allocUnsafeSlow(1 + blockSize);
      randomFillSync(block);
      block[0] = MSG.DOWNLOAD_DATA;
      this.blocks.push(block);
    }
  }

  private block(): Buffer {
    // Round-robin from a random start: consecutive messages differ, and there is no
    // per-message call into the random number generator.
    this.next = (this.next + 1) % BLOCKS;
    return this.blocks[this.next]!;
  }

  /** A DOWNLOAD_DATA WebSocket message carrying `bytes` (≤ blockSize) payload bytes. */
  downloadMessage(bytes: number): Buffer {
    return this.block().subarray(0, 1 + bytes);
  }

  /** `bytes` (≤ blockSize) raw random bytes, for HTTP bodies. */
  raw(bytes: number): Buffer {
    const offset = 1 + randomInt(0, this.blockSize - bytes + 1);
    return this.block().subarray(offset, offset + bytes);
  }
}
