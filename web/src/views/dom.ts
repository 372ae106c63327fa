// The page's elements, by id (index.html).

export function el<T extends HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (e === null) throw new Error(`#${id} is missing from index.html`);
  return e as T;
}

/** Sets an element's text only when it changes: a screen reader reads a live region again
 *  whenever its text is replaced, even by the same words. */
export function setText(e: HTMLElement, text: string): void {
  if (e.textContent !== text) e.textContent = text;
}

/** Where a series (by key) stands in the page's order: lower first. */
export type Rank = (key: string | undefined) => number;

/** Puts `node` among its siblings by `rank` (ties after each other, in arrival order), so
 *  series appear in the same place every time. */
export function placeInOrder(
  parent: HTMLElement,
  node: HTMLElement,
  key: string,
  rank: Rank,
): void {
  node.dataset.series = key;
  const after = [...parent.children].find(
    (c) => rank((c as HTMLElement).dataset.series) > rank(key),
  );
  parent.insertBefore(node, after ?? null);
}

/**
 * Runs `run` once at the next animation frame however often it is asked for before then: a
 * burst of changes is shown once, as soon as the page is drawn next, and never later than
 * that. `frame` is requestAnimationFrame (a test gives its own).
 */
export class OncePerFrame {
  private pending = false;

  constructor(
    private readonly run: () => void,
    private readonly frame: (callback: () => void) => unknown = (callback) =>
      requestAnimationFrame(callback),
  ) {}

  request(): void {
    if (this.pending) return;
    this.pending = true;
    this.frame(() => {
      this.pending = false;
      this.run();
    });
  }
}
