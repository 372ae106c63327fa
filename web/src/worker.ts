// The probe worker: the engine (engine/engine.ts) off the page's thread, so that drawing never
// delays a timestamp. This file only turns the page's messages into engine calls.

import wasmUrl from "../../core/pkg/nowcast_core_bg.wasm?url";
// The file readers' module: only its URL here; it is fetched when a file is imported or
// exported (forecast.ts `loadReader`).
import readerUrl from "../../core/pkg/reader/nowcast_reader_bg.wasm?url";
import { Engine } from "./engine/engine";
import type { PageCommand } from "./messages";

const scope = globalThis as unknown as DedicatedWorkerGlobalScope;
const engine = Engine.start(
  {
    // The site's base: the directory above this worker's (assets/ in the build, src/ under
    // the dev server), so that probes go under the path a reverse proxy serves echo-node at.
    origin: new URL("../", scope.location.href).href,
    host: scope.location.host,
    post: (e) => scope.postMessage(e),
  },
  wasmUrl,
  readerUrl,
);

// A target or mirror the serving echo-node's Content-Security-Policy does not list cannot be
// reached; without this the user would only see probes time out.
scope.addEventListener("securitypolicyviolation", (e) => {
  const uri = (e as SecurityPolicyViolationEvent).blockedURI;
  void engine.then((en) => en.blocked(uri));
});

scope.onmessage = (e: MessageEvent<PageCommand>) => {
  const cmd = e.data;
  void engine.then((en) => {
    switch (cmd.type) {
      case "settings":
        return en.applySettings(cmd.settings);
      case "budget":
        return en.restoreBudget(cmd.spends);
      case "suspend":
        return en.suspend();
      case "resume":
        return en.resume();
      case "mirrors":
        return en.setMirrors(cmd.urls);
      case "clear":
        return en.clear();
      case "import":
        return en.importFile(cmd.file, cmd.text);
      case "remove-import":
        return en.removeImport(cmd.key);
      case "predictability":
        return en.predictability(cmd.key);
      case "rank":
        return en.rank(cmd.fileBytes, cmd.sites);
      case "export":
        return en.exportRecords(cmd.format, cmd.series);
    }
  });
};
