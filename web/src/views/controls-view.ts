// The controls: period, probe size, transport, target and hourly budget, kept in the URL so
// that a link reproduces them (settings.ts), and suspend/resume.

import { formatBytes, formatPeriod, formatSpan } from "../format";
import type { PageCommand } from "../messages";
import {
  budgetStrain,
  endpointName,
  formatSize,
  parseSize,
  readSettings,
  settingsQuery,
  type Settings,
  type TransportChoice,
} from "../settings";
import { el, setText } from "./dom";

/** Where the targets the user chose to measure are kept across reloads: a link's target is
 *  probed only once the user has chosen it, here or before. */
const TARGETS_KEY = "nowcast.targets";

/** The targets the user chose before (none when storage is unreadable). */
function chosenTargets(): string[] {
  try {
    const v: unknown = JSON.parse(localStorage.getItem(TARGETS_KEY) ?? "[]");
    return Array.isArray(v) ? v.filter((t): t is string => typeof t === "string") : [];
  } catch {
    return [];
  }
}

/** Remembers that the user chose to measure `url` (the last 20 kept). */
function rememberTarget(url: string): void {
  try {
    const kept = [url, ...chosenTargets().filter((t) => t !== url)].slice(0, 20);
    localStorage.setItem(TARGETS_KEY, JSON.stringify(kept));
  } catch {
    // Storage refused (private mode, quota): the link asks again after a reload.
  }
}

export class ControlsView {
  /** The settings in force, as the worker last heard them. */
  settings: Settings;
  private readonly period = el<HTMLSelectElement>("period");
  private readonly size = el<HTMLSelectElement>("size");
  private readonly transport = el<HTMLSelectElement>("transport");
  private readonly target = el<HTMLSelectElement>("target-select");
  private readonly problem = el("settings-problem");
  private readonly warning = el("settings-warning");
  private readonly budget = el<HTMLInputElement>("budget");
  private readonly suspend = el<HTMLButtonElement>("suspend");
  private readonly ask = el("target-ask");
  /** A target named in the link that the user has not chosen yet: not probed until they do
   *  (a link must not make its visitors' browsers send probes to a host they did not pick). */
  private asked: string | undefined;
  /** Whether the problem shown is a refused budget (cleared by the next good one). */
  private budgetRefused = false;

  /**
   * Reads the settings from the link (a link naming this site as its target means the site),
   * and says what in it was refused.
   * @param siteUrl the serving site's URL.
   * @param targetChosen the user chose another target.
   * @param mirrorsProbed how many mirrors are probed (each adds a download to a round).
   */
  constructor(
    siteUrl: string,
    private readonly send: (cmd: PageCommand) => void,
    targetChosen: () => void,
    private readonly mirrorsProbed: () => number,
  ) {
    const read = readSettings(location.search);
    const linked = read.settings.target === siteUrl ? undefined : read.settings.target;
    const chosen = linked !== undefined && chosenTargets().includes(linked);
    this.asked = chosen ? undefined : linked;
    this.settings = { ...read.settings, target: chosen ? linked : undefined };
    if (read.problems.length > 0) {
      this.problem.textContent = read.problems.join("; ");
      this.problem.hidden = false;
    }
    for (const input of [this.period, this.size, this.transport, this.budget]) {
      input.addEventListener("change", () => this.apply());
    }
    // Enter in the budget's box submits the form: the change above takes it, and the page
    // must not reload with every control's value in its link.
    el<HTMLFormElement>("controls").addEventListener("submit", (e) => e.preventDefault());
    const choose = () => {
      // The user chose: a complaint about the link's target, or its question, no longer
      // applies.
      this.problem.hidden = true;
      this.budgetRefused = false;
      this.ask.hidden = true;
      this.asked = undefined;
      if (this.target.value !== "") rememberTarget(this.target.value);
      this.apply();
      targetChosen();
    };
    this.target.addEventListener("change", choose);
    el<HTMLButtonElement>("target-ask-yes").addEventListener("click", () => {
      if (this.asked === undefined) return;
      this.target.value = this.asked;
      choose();
    });
    this.suspend.addEventListener("click", () => {
      const suspending = this.suspend.getAttribute("aria-pressed") !== "true";
      this.suspend.setAttribute("aria-pressed", String(suspending));
      this.suspend.textContent = suspending ? "Resume" : "Suspend";
      send({ type: suspending ? "suspend" : "resume" });
    });
    this.target.options[0]!.textContent = `this site (${location.host})`;
  }

  /** Offers `url` as a target, named `text` (renamed if already offered). */
  offerTarget(url: string, text: string): void {
    const known = [...this.target.options].find((o) => o.value === url);
    if (known !== undefined) known.textContent = text;
    else this.target.add(new Option(text, url));
  }

  /** Shows the settings in the controls and sends them to the worker. */
  start(): void {
    const s = this.settings;
    const period = String(s.periodS);
    if (![...this.period.options].some((o) => o.value === period)) {
      this.period.add(new Option(`${period} s`, period));
    }
    this.period.value = period;
    const size = formatSize(s.size);
    if (![...this.size.options].some((o) => o.value === size)) {
      this.size.add(new Option(size, size));
    }
    this.size.value = size;
    this.transport.value = s.transport;
    this.budget.value = String(s.budgetMiB);
    // A target named only in the link is offered too, so that the control shows what is
    // measured, or what the link asks to measure.
    const linked = s.target ?? this.asked;
    if (linked !== undefined) {
      this.offerTarget(linked, `${endpointName(linked)} (from the link)`);
    }
    this.target.value = s.target ?? "";
    if (this.asked !== undefined) {
      setText(
        el("target-ask-text"),
        `This link asks to measure ${endpointName(this.asked)}, another site. ` +
          "The page measures this site until you choose it.",
      );
      el("target-ask-yes").textContent = `Measure ${endpointName(this.asked)}`;
      this.ask.hidden = false;
    }
    this.send({ type: "settings", settings: s });
    this.warn();
  }

  /** Says so when the probe size and period chosen would spend the hourly budget early. */
  warn(): void {
    const s = this.settings;
    const strain = budgetStrain(s, this.mirrorsProbed());
    this.warning.hidden = strain === undefined;
    if (strain === undefined || s.size === "auto") return;
    // A live region, and this runs every round while mirrors are probed: set when it changes.
    setText(
      this.warning,
      `${formatBytes(s.size)} probes every ${formatPeriod(s.periodS)} move at least ` +
        // A full budget's time: the status line's warning says how long what is left lasts.
        `${formatBytes(strain.hourBytes)} an hour: a full ${formatBytes(s.budgetMiB * 1024 * 1024)} ` +
        `budget would last about ${formatSpan(strain.lastsS * 1000)}, then bandwidth probes ` +
        "pause until older bytes leave the hour. A smaller size, a longer period or " +
        '"automatic" keeps them going.',
    );
  }

  /** Takes the controls' values, writes them to the URL and sends them to the worker. */
  private apply(): void {
    // An empty, zero or negative budget is refused: the box shows the one in force again, and
    // says why, rather than show a figure the page does not keep to.
    const budget = this.budget.value.trim() === "" ? NaN : Number(this.budget.value);
    const budgetOk = Number.isFinite(budget) && budget > 0;
    if (!budgetOk) {
      this.budget.value = String(this.settings.budgetMiB);
      this.problem.textContent =
        `The budget must be a number of MiB above 0; it stays at ` +
        `${this.settings.budgetMiB} MiB per hour.`;
      this.problem.hidden = false;
      this.budgetRefused = true;
    } else if (this.budgetRefused) {
      this.problem.hidden = true;
      this.budgetRefused = false;
    }
    this.settings = {
      periodS: Number(this.period.value),
      size: parseSize(this.size.value) ?? this.settings.size,
      transport: this.transport.value as TransportChoice,
      budgetMiB: budgetOk ? budget : this.settings.budgetMiB,
      mirrors: this.settings.mirrors,
      target: this.target.value === "" ? undefined : this.target.value,
    };
    history.replaceState(null, "", settingsQuery(this.settings) || location.pathname);
    this.send({ type: "settings", settings: this.settings });
    this.warn();
  }
}
