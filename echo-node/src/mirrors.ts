/**
 * Mirrors: other echo-node sites the page may probe and rank (spec "Mirrors"). A mirrors file
 * is JSON: either an array of entries or `{ "mirrors": [...] }`, each entry
 * `{ "name": string, "url": "https://…", "location": string }`. Errors name the entry and the
 * field so an operator can fix the file without guessing.
 */
import { readFile } from "node:fs/promises";

export interface Mirror {
  name: string;
  /** Base URL of the mirror's echo-node (http or https), normalised by `new URL`. */
  url: string;
  /** Free text such as "Frankfurt, Germany". */
  location: string;
}

export class MirrorsError extends Error {
  override name = "MirrorsError";
}

/** `text` with any `user:password@` of a URL in it hidden, for messages and logs. */
export function redactCredentials(text: string): string {
  return text.replace(/(\/\/)[^/?#@\s]*@/g, "$1…@");
}

/**
 * A mirror's URL is published as it is (`/api/mirrors`, the page's CSP) and the page appends
 * its paths to it: credentials would be handed to every visitor, and a query or fragment
 * would end up in the middle of every probe's URL.
 */
function checkUrl(raw: string, where: string): string {
  const shown = redactCredentials(raw);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new MirrorsError(`${where}: "url" '${shown}' is not an absolute URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new MirrorsError(`${where}: "url" must be http:// or https://, got '${url.protocol}'`);
  }
  if (url.username !== "" || url.password !== "") {
    throw new MirrorsError(
      `${where}: "url" '${shown}' carries a user name or password, which is not allowed: ` +
        "mirror URLs are published to every visitor in /api/mirrors",
    );
  }
  const extra = [url.search !== "" && "a query", url.hash !== "" && "a fragment"].filter(Boolean);
  // `https://host/?` and `https://host/#` parse to an empty search and hash; refuse them too.
  if (extra.length === 0 && /[?#]/.test(raw))
    extra.push(raw.includes("?") ? "a query" : "a fragment");
  if (extra.length > 0) {
    throw new MirrorsError(
      `${where}: "url" '${shown}' has ${extra.join(" and ")}, which is not allowed: ` +
        "give the mirror's base URL (the page appends its paths to it), e.g. https://mirror.example.org/nowcast",
    );
  }
  return url.href;
}

/** Validates parsed JSON; `source` names the file in messages. */
export function parseMirrors(data: unknown, source: string): Mirror[] {
  const list = Array.isArray(data)
    ? data
    : data !== null &&
        typeof data === "object" &&
        Array.isArray((data as { mirrors?: unknown }).mirrors)
      ? (data as { mirrors: unknown[] }).mirrors
      : undefined;
  if (list === undefined) {
    throw new MirrorsError(`${source}: expected an array of mirrors or {"mirrors": [...]}`);
  }
  return list.map((entry, i) => {
    const where = `${source}: mirror #${i + 1}`;
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
      throw new MirrorsError(`${where}: expected an object with name, url and location`);
    }
    const e = entry as Record<string, unknown>;
    for (const field of ["name", "url"] as const) {
      if (typeof e[field] !== "string" || (e[field] as string).trim() === "") {
        throw new MirrorsError(`${where}: "${field}" must be a non-empty string`);
      }
    }
    if (e.location !== undefined && typeof e.location !== "string") {
      throw new MirrorsError(`${where}: "location" must be a string`);
    }
    return {
      name: (e.name as string).trim(),
      url: checkUrl(e.url as string, where),
      location: ((e.location as string | undefined) ?? "").trim(),
    };
  });
}

/** A mirrors file's text (from `path`, named in messages) → mirrors, or a MirrorsError. A
 *  byte order mark (which some Windows editors write) is not part of the JSON. */
export function parseMirrorsText(withBom: string, path: string): Mirror[] {
  const text = withBom.startsWith("\ufeff") ? withBom.slice(1) : withBom;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    const message = (e as Error).message;
    throw new MirrorsError(
      `mirrors file ${path}${lineColumn(text, message)} is not valid JSON: ${message}`,
    );
  }
  return parseMirrors(data, path);
}

/**
 * `:LINE:COLUMN` (1-based) of the offset V8's JSON.parse names ("… at position 63"), so that an
 * editor jumps to it; "" when the message names none (the end of the text, say).
 */
function lineColumn(text: string, message: string): string {
  const m = /at position (\d+)/.exec(message);
  if (!m) return "";
  const at = Math.min(Number(m[1]), text.length);
  const before = text.slice(0, at);
  const line = before.split("\n").length;
  const column = at - (before.lastIndexOf("\n") + 1) + 1;
  return `:${line}:${column}`;
}

export async function loadMirrorsFile(path: string): Promise<Mirror[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    throw new MirrorsError(`cannot read mirrors file ${path}: ${(e as Error).message}`);
  }
  return parseMirrorsText(text, path);
}

/** `name|url|location` from `--mirror` (location optional). */
export function parseMirrorFlag(text: string): Mirror {
  const [name, url, ...rest] = text.split("|");
  if (name === undefined || url === undefined) {
    throw new MirrorsError(
      `mirror '${redactCredentials(text)}' must look like 'name|https://host|location'`,
    );
  }
  const [mirror] = parseMirrors(
    [{ name, url, location: rest.join("|") }],
    `mirror '${redactCredentials(text)}'`,
  );
  return mirror!;
}

/** Warnings for mirrors listed more than once (by URL or by name, from the flags and the file
 *  together): the page would probe the same server twice, or show two rows it cannot tell
 *  apart. They are still published as given. */
export function duplicateMirrors(mirrors: readonly Mirror[]): string[] {
  const byUrl = new Map<string, Mirror>();
  const byName = new Map<string, Mirror>();
  const warnings: string[] = [];
  for (const m of mirrors) {
    const name = m.name.toLowerCase();
    const [earlier, what] = byUrl.has(m.url)
      ? [byUrl.get(m.url)!, "URL"]
      : byName.has(name)
        ? [byName.get(name)!, "name"]
        : [undefined, ""];
    if (earlier !== undefined) {
      warnings.push(
        `mirror '${m.name}' (${m.url}) has the ${what} of mirror '${earlier.name}' ` +
          `(${earlier.url}): list each mirror once`,
      );
    }
    if (!byUrl.has(m.url)) byUrl.set(m.url, m);
    if (!byName.has(name)) byName.set(name, m);
  }
  return warnings;
}

/** Origin of each mirror, for the CORS/WebSocket allowlist and the page's CSP. */
export function mirrorOrigins(mirrors: readonly Mirror[]): string[] {
  return [...new Set(mirrors.map((m) => new URL(m.url).origin))];
}
