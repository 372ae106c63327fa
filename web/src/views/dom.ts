// The page's elements, by id (index.html).

export function el<T extends HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (e === null) throw new Error(`#${id} is missing from index.html`);
  return e as T;
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
