#!/usr/bin/env node
// Keeps ARCHITECTURE.md true: reads the rules block of that file (the fenced block tagged
// `rules`), then checks every source file of the tree against it.
//
//   room NAME GLOB…            files that belong to a room (first matching room wins)
//   NAME -> NAME NAME:types…   the rooms a room may import from (itself always allowed);
//                              NAME:types allows `import type` only (TypeScript)
//   pure NAME…                 rooms whose files may not do I/O or read the clock
//   forbid rs|ts TOKEN         a token no file of a pure room may contain (code and comments)
//
// Imports are read as text: paths through `crate::`, `super::` and `nowcast_core::` in Rust
// (a `mod x;` declaration is structure, not a dependency); `import … from "./x"`, `import("./x")` and `export … from "./x"` in TypeScript.
// Exit status 1 with one line per violation, naming the file, the line and the rule.
import { readFileSync, readdirSync, statSync, existsSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
const SKIP = new Set(["node_modules", "target", "dist", "pkg", ".git", "test-results"]);

function parseRules(text) {
  const block = text.match(/```rules\n([\s\S]*?)```/);
  if (!block) throw new Error("ARCHITECTURE.md has no ```rules block");
  const rooms = [];
  const allowed = new Map();
  const pure = new Set();
  const forbid = { rs: [], ts: [] };
  block[1].split("\n").forEach((raw, i) => {
    const line = raw.replace(/#.*$/, "").trim();
    if (line === "") return;
    const where = `ARCHITECTURE.md rules line ${i + 1}`;
    let m;
    if ((m = line.match(/^room\s+(\S+)\s+(.+)$/))) {
      rooms.push({ name: m[1], globs: m[2].split(/\s+/).map(globToRegExp) });
    } else if ((m = line.match(/^(\S+)\s*->\s*(.*)$/))) {
      allowed.set(m[1], new Set(m[2].split(/\s+/).filter(Boolean)));
    } else if ((m = line.match(/^pure\s+(.+)$/))) {
      m[1].split(/\s+/).forEach((r) => pure.add(r));
    } else if ((m = line.match(/^forbid\s+(rs|ts)\s+(.+)$/))) {
      forbid[m[1]].push(m[2]);
    } else {
      throw new Error(`${where}: cannot read "${line}"`);
    }
  });
  const names = new Set(rooms.map((r) => r.name));
  for (const [from, tos] of allowed) {
    for (const n of [from, ...tos]) {
      if (!names.has(n.replace(/:types$/, "")))
        throw new Error(`rules name an unknown room "${n}"`);
    }
  }
  return { rooms, allowed, pure, forbid };
}

function globToRegExp(glob) {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*" && glob[i + 1] === "*") {
      re += ".*";
      i++;
      if (glob[i + 1] === "/") i++;
    } else if (c === "*") re += "[^/]*";
    else re += c.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

function walk(dir, out = []) {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (/\.(rs|ts)$/.test(name) && !/\.(d|test)\.ts$/.test(name)) out.push(path);
  }
  return out;
}

const rel = (p) => relative(root, p).split(sep).join("/");

/** The files a Rust source names through `crate::`, `super::`, `nowcast_core::` and `mod`. */
function rustImports(file, text) {
  const crateRoot = text && findCrateSrc(file);
  const out = [];
  const lines = text.split("\n");
  lines.forEach((line, i) => {
    const code = line.replace(/\/\/.*$/, "");
    const add = (target) => target && out.push({ line: i + 1, target });
    for (const m of code.matchAll(/\bcrate::((?:\w+::)*\w+)/g)) add(rustPath(crateRoot, m[1]));
    for (const m of code.matchAll(/\bnowcast_core::((?:\w+::)*\w+)/g))
      add(rustPath(join(root, "core/src"), m[1]));
    for (const m of code.matchAll(/\bsuper::((?:\w+::)*\w+)/g)) {
      const parent = rustModuleDir(file);
      add(rustPath(dirname(parent), m[1], parent));
    }
  });
  return out;
}

function findCrateSrc(file) {
  let dir = dirname(file);
  while (dir.startsWith(root) && !existsSync(join(dir, "Cargo.toml"))) dir = dirname(dir);
  return join(dir, "src");
}

/** The directory holding a Rust file's child modules. */
function rustModuleDir(file) {
  const base = file.replace(/\.rs$/, "");
  return /(?:^|[/\\])(mod|lib|main)$/.test(base) ? dirname(file) : base;
}

/** The longest prefix of `segments` that names a module file under `dir`. */
function rustPath(dir, path, fallback) {
  let best = fallback;
  let here = dir;
  for (const seg of path.split("::")) {
    const asFile = join(here, `${seg}.rs`);
    const asDir = join(here, seg, "mod.rs");
    if (existsSync(asFile)) best = asFile;
    else if (existsSync(asDir)) best = asDir;
    else break;
    here = join(here, seg);
  }
  return best;
}

/** The files a TypeScript source imports, and whether only types are taken. */
function tsImports(file, text) {
  const out = [];
  const statement =
    /^\s*(?:(import|export)(\s+type)?\b[^;]*?from\s*|import\s*)["'](\.{1,2}\/[^"'?]+)[^"']*["']|import\(\s*["'](\.{1,2}\/[^"'?]+)/gm;
  for (const m of text.matchAll(statement)) {
    const spec = m[3] ?? m[4];
    const base = resolve(dirname(file), spec);
    const target = [base, `${base}.ts`, join(base, "index.ts"), base.replace(/\.js$/, ".ts")]
      .filter((p) => existsSync(p) && statSync(p).isFile())
      .shift();
    if (target === undefined) continue;
    const line = text.slice(0, m.index).split("\n").length;
    out.push({ line, target, typeOnly: m[2] !== undefined });
  }
  return out;
}

/** Rust text with each `#[cfg(test)]` item blanked out (braces matched; lines kept). */
function withoutTestModules(text) {
  let out = text;
  let at;
  while ((at = out.indexOf("#[cfg(test)]")) >= 0) {
    let i = out.indexOf("{", at);
    const semicolon = out.indexOf(";", at);
    if (i < 0 || (semicolon >= 0 && semicolon < i)) i = semicolon;
    else {
      for (let depth = 0; i < out.length; i++) {
        if (out[i] === "{") depth++;
        else if (out[i] === "}" && --depth === 0) break;
      }
    }
    const end = Math.min(out.length, i + 1);
    out = out.slice(0, at) + out.slice(at, end).replace(/[^\n]/g, " ") + out.slice(end);
  }
  return out;
}

/** The text with comments blanked out (line breaks kept, so line numbers still match). */
function withoutComments(text) {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, " "))
    .replace(/(^|[^:"'])\/\/.*$/gm, "$1");
}

function main() {
  const rules = parseRules(readFileSync(join(root, "ARCHITECTURE.md"), "utf8"));
  const roomOf = (path) => rules.rooms.find((r) => r.globs.some((g) => g.test(rel(path))))?.name;
  const problems = [];
  let checked = 0;
  let importsRead = 0;
  for (const file of walk(root)) {
    const room = roomOf(file);
    if (room === undefined) continue;
    checked++;
    const text = readFileSync(file, "utf8");
    const lang = file.endsWith(".rs") ? "rs" : "ts";
    if (rules.pure.has(room)) {
      // Test modules may use what they like, and comments may name what the code avoids:
      // the rule is about the code that ships.
      const shipped = withoutComments(lang === "rs" ? withoutTestModules(text) : text);
      shipped.split("\n").forEach((line, i) => {
        for (const token of rules.forbid[lang]) {
          if (line.includes(token)) {
            problems.push(`${rel(file)}:${i + 1}: "${token}" in pure room ${room}`);
          }
        }
      });
    }
    const imports = lang === "rs" ? rustImports(file, text) : tsImports(file, text);
    importsRead += imports.length;
    const may = rules.allowed.get(room) ?? new Set();
    for (const { line, target, typeOnly } of imports) {
      const to = roomOf(target);
      if (to === undefined || to === room || may.has(to)) continue;
      if (typeOnly && may.has(`${to}:types`)) continue;
      problems.push(`${rel(file)}:${line}: room ${room} imports ${rel(target)} (room ${to})`);
    }
  }
  // A reader that silently stopped seeing imports would pass everything.
  if (checked < 100 || importsRead < 200) {
    problems.push(
      `only ${checked} files and ${importsRead} imports were read: is the check broken?`,
    );
  }
  if (problems.length > 0) {
    console.error(problems.join("\n"));
    console.error(`architecture: ${problems.length} violation(s) of ARCHITECTURE.md's rules`);
    process.exit(1);
  }
  console.log(
    `architecture: ${checked} files and their ${importsRead} imports follow ARCHITECTURE.md's rules`,
  );
}

main();
