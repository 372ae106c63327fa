/**
 * The hostile-input corpus kept in test/corpus/ (data, not code, so that a new case found by
 * an attack or a fuzz run is one line added to a file): raw HTTP requests, WebSocket frames
 * sent after a valid handshake, probe messages, request-targets, mirrors files, and the
 * headers Chromium sends. Shared by the tests and the hostile bench.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** test/corpus from test/ (vitest) and from dist/dev/test (the compiled bench). */
const here = dirname(fileURLToPath(import.meta.url));
const DIR = here.includes(`${join("dist", "dev")}`)
  ? join(here, "../../../test/corpus")
  : join(here, "corpus");

function lines<T>(file: string): T[] {
  return readFileSync(join(DIR, file), "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as T);
}

/** A raw HTTP request (bytes as Latin-1 text) and its name. */
export interface RawRequest {
  name: string;
  raw: string;
}

/** WebSocket frames (client→server, hex) sent after a valid handshake. */
export interface RawFrames {
  name: string;
  hex: string;
}

export const httpCorpus = (): RawRequest[] => lines<RawRequest>("http.ndjson");
export const frameCorpus = (): RawFrames[] => lines<RawFrames>("ws-frames.ndjson");
export const probeMessageCorpus = (): Uint8Array[] =>
  lines<RawFrames>("probe-messages.ndjson").map((m) => Buffer.from(m.hex, "hex"));
export const targetCorpus = (): string[] => lines<string>("targets.ndjson");
export const mirrorsFileCorpus = (): string[] => lines<string>("mirrors.ndjson");

export interface ChromiumRow {
  what: string;
  captured: boolean;
  server: "A" | "B";
  kind: "api" | "websocket" | "page";
  ok: boolean;
  headers: Record<string, string>;
}

export function chromiumRows(): ChromiumRow[] {
  const data = JSON.parse(readFileSync(join(DIR, "chromium-requests.json"), "utf8")) as {
    rows: ChromiumRow[];
  };
  return data.rows;
}

/** A valid WebSocket handshake for /ws (RFC 6455 §4.1), ready for frames after it. */
export const WS_HANDSHAKE =
  "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
