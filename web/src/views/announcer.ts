// What the page tells a screen reader without being asked, through one polite live region
// (index.html #announcer, visually hidden): a summary when its gist changes, never each
// sample. The headline's figures once they have come and when a verdict changes, the
// ranking's fastest site when it changes, a new problem in the banner, the predictability of
// a series the user picks. The text on screen that changes with every probe (the bytes used,
// the ranking's times, the predictability sentence) is not live: a screen reader reads it
// when the user gets there.

/** How a topic is paced. */
export interface Pace {
  /** How long a change waits before it is said (ms), so that figures arriving together
   *  (a round's download, upload and RTT) are said together, as they stand then. */
  settleMs: number;
  /** The least time between two announcements of the topic (ms). */
  gapMs: number;
}

/** Said at once: a problem, or the answer to what the user just did. */
export const AT_ONCE: Pace = { settleMs: 0, gapMs: 0 };

interface Topic {
  /** The gist last said (or recorded unsaid). */
  said: string | undefined;
  saidAt: number;
  /** What will be said when the timer fires: the newest text given. */
  pending: { gist: string; text: string } | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
}

export class Announcer {
  private readonly topics = new Map<string, Topic>();

  /** @param speak puts a sentence in the live region. */
  constructor(
    private readonly speak: (text: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Says `text` about `topic` once its `gist` differs from the gist last said of it, after
   * `pace.settleMs` and no sooner than `pace.gapMs` after the topic's last announcement; a
   * call before then replaces the text (the newest figures are said), and one whose gist is
   * the one last said cancels it. An empty `text` records the gist without saying anything
   * (a problem that went away: the status line says so).
   */
  say(topic: string, gist: string, text: string, pace: Pace): void {
    let t = this.topics.get(topic);
    if (t === undefined) {
      t = { said: undefined, saidAt: -Infinity, pending: undefined, timer: undefined };
      this.topics.set(topic, t);
    }
    if (gist === t.said) {
      t.pending = undefined;
      if (t.timer !== undefined) clearTimeout(t.timer);
      t.timer = undefined;
      return;
    }
    t.pending = { gist, text };
    if (t.timer !== undefined) return;
    const now = this.now();
    const wait = Math.max(pace.settleMs, t.saidAt + pace.gapMs - now, 0);
    const topicState = t;
    if (wait === 0) this.fire(topicState);
    else topicState.timer = setTimeout(() => this.fire(topicState), wait);
  }

  private fire(t: Topic): void {
    t.timer = undefined;
    const p = t.pending;
    t.pending = undefined;
    if (p === undefined || p.gist === t.said) return;
    t.said = p.gist;
    if (p.text === "") return;
    t.saidAt = this.now();
    this.speak(p.text);
  }
}

/** Announcements kept in the region: older ones are taken out (removals are not read). */
const KEPT = 3;

/** Speaks into `region` (a polite live region): each sentence a paragraph of its own, added,
 *  so that one topic's announcement never cuts off another's. */
export function liveRegion(region: HTMLElement): (text: string) => void {
  return (text) => {
    const p = document.createElement("p");
    p.textContent = text;
    region.append(p);
    while (region.childElementCount > KEPT) region.firstElementChild!.remove();
  };
}
