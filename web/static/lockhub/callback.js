// @ts-check
/**
 * How the client calls the page's callbacks.
 *
 * @module lockhub/callback
 */

/**
 * Calls fn, reporting a throw instead of propagating it, so that one broken callback
 * cannot break the client's state machine.
 * @param {Function} fn
 * @param {...unknown} args
 */
export function safeCall(fn, ...args) {
  try {
    fn(...args);
  } catch (err) {
    console.error('lockhub: callback failed', err);
  }
}
