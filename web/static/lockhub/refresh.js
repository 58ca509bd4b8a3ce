// @ts-check
/**
 * The in-band refresh of a socket's token (PROTOCOL.md §4): a new `auth` on the open
 * socket `refreshBeforeMs` before the token expires, and again 5 s after a failure (a
 * hub that closes the socket with 4401 meanwhile makes the reconnect take a fresh one).
 * Internal to the client: {@link LockClient} owns one and tells it each token a socket
 * authenticated with.
 *
 * @module lockhub/refresh
 */

import { jwtExpiry } from './token.js';

/** @typedef {import('./clock.js').Clock} Clock */
/** @typedef {import('./clock.js').TimerHandle} TimerHandle */

/**
 * What the refresh needs of its client. Every member is read when it is needed.
 * @typedef {object} RefreshHost
 * @property {Clock} clock
 * @property {number} beforeMs  refresh this long before the token expires
 * @property {() => number} now  the client's estimate of the server's clock, Unix ms
 * @property {() => (string|Promise<string>)} getToken
 * @property {(frame: Record<string, unknown>) => Promise<any>} request  sends on the current socket only
 * @property {() => unknown} socket  the current socket (a refresh belongs to the socket it began on)
 * @property {() => boolean} live  a socket is authenticated and the client not closed
 * @property {(token: string) => void} refreshed  the hub took token
 * @property {(err: unknown) => void} onError
 */

/** One timer: the next refresh of the current socket's token. */
export class TokenRefresh {
  /** @type {RefreshHost} */
  #h;
  /** @type {TimerHandle|undefined} */
  #timer;

  /** @param {RefreshHost} host */
  constructor(host) {
    this.#h = host;
  }

  /** Refreshes token before it expires (a token without `exp` is not refreshed). @param {string} token */
  schedule(token) {
    this.stop();
    const exp = jwtExpiry(token);
    if (exp === null) return;
    const delay = Math.max(1000, exp - this.#h.beforeMs - this.#h.now());
    this.#timer = this.#h.clock.setTimeout(() => void this.#refresh(), Math.min(delay, 2 ** 31 - 1));
  }

  /** Clears the timer (the socket ended, or the client). */
  stop() {
    this.#h.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #refresh() {
    const h = this.#h;
    if (!h.live()) return;
    const sock = h.socket();
    try {
      const token = await h.getToken();
      if (sock !== h.socket() || !h.live()) return;
      const r = await h.request({ type: 'auth', token });
      if (r.outcome === 'refreshed' && sock === h.socket()) {
        h.refreshed(token);
        this.schedule(token);
      }
    } catch (err) {
      h.onError(err);
      if (sock === h.socket() && h.live()) {
        this.stop();
        this.#timer = h.clock.setTimeout(() => void this.#refresh(), 5000);
      }
    }
  }
}
