// @ts-check
/**
 * The page's lifecycle as the client hears it: `pagehide` (release what it holds; into
 * the back/forward cache, close the socket), `pageshow` (back from that cache), `online`
 * (the network is back: reconnect now). Nothing without a `window` (Node).
 *
 * @module lockhub/lifecycle
 */

/**
 * @typedef {object} PageEvents
 * @property {(ev: PageTransitionEvent) => void} hide
 * @property {(ev: PageTransitionEvent) => void} show
 * @property {() => void} online
 */

/**
 * Listens to the page's lifecycle until the returned function is called.
 * @param {PageEvents} on
 * @returns {() => void} stops listening
 */
export function listenToPage(on) {
  if (typeof window === 'undefined' || typeof window.addEventListener !== 'function') return () => {};
  window.addEventListener('pagehide', on.hide);
  window.addEventListener('pageshow', on.show);
  window.addEventListener('online', on.online);
  return () => {
    window.removeEventListener('pagehide', on.hide);
    window.removeEventListener('pageshow', on.show);
    window.removeEventListener('online', on.online);
  };
}
