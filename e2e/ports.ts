import { createServer } from "node:net";

/**
 * A TCP port nothing listens on now on loopback (the kernel's choice), for a server a test
 * starts (`nowcast serve` takes the same number for UDP; irtt serves UDP on it). Should it be
 * taken before the server binds, the server's start fails and says so.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
