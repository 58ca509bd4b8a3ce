// @ts-check
/**
 * Finding the demo page's elements (index.html). A missing one is a bug of the page:
 * it fails at once, loudly.
 */

/**
 * The element with this id.
 * @param {string} id
 * @returns {HTMLElement}
 */
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`demo: no #${id}`);
  return el;
}

/**
 * The element with this data-testid.
 * @param {string} testid
 * @returns {HTMLElement}
 */
export function byTestid(testid) {
  const el = document.querySelector(`[data-testid="${testid}"]`);
  if (!(el instanceof HTMLElement)) throw new Error(`demo: no [data-testid="${testid}"]`);
  return el;
}
