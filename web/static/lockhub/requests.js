// @ts-check
/**
 * Requests in flight and their answers, matched by `id` (PROTOCOL.md §4). Internal to
 * the client: {@link LockClient} owns one {@link Requests}, hands it every answer frame,
 * and tells it when a socket may send, and when one ended.
 *
 * @module lockhub/requests
 */

import { LockhubError } from './protocol.js';

/** @typedef {import('./clock.js').Clock} Clock */
/** @typedef {import('./clock.js').TimerHandle} TimerHandle */

/**
 * @typedef {object} Pending
 * @property {Record<string, unknown>} frame
 * @property {(r: any) => void} resolve
 * @property {(e: unknown) => void} reject
 * @property {boolean} resend   send again after a reconnect instead of failing
 * @property {boolean} sent
 * @property {TimerHandle|undefined} timer
 */

/**
 * What the requests need of their client.
 * @typedef {object} RequestsHost
 * @property {Clock} clock
 * @property {number} timeoutMs  an unanswered request fails after this
 * @property {(frame: Record<string, unknown>) => boolean} send
 *   sends a frame on the current socket; false when there is none that is open
 * @property {() => boolean} sending  requests may go now (the socket is open, its auth sent)
 */

/** The requests of one client, by id. */
export class Requests {
  /** @type {RequestsHost} */
  #host;
  #nextId = 1;
  /** @type {Map<string, Pending>} */
  #pending = new Map();

  /** @param {RequestsHost} host */
  constructor(host) {
    this.#host = host;
  }

  /** A fresh request id. */
  nextId() {
    return String(this.#nextId++);
  }

  /**
   * Sends a request (now, or when the connection allows) and resolves with its answer.
   * @param {Record<string, unknown>} frame
   * @param {boolean} resend  send again after a reconnect instead of failing
   * @returns {Promise<any>}
   */
  add(frame, resend) {
    const id = this.nextId();
    return new Promise((resolve, reject) => {
      /** @type {Pending} */
      const p = { frame: { ...frame, id }, resolve, reject, resend, sent: false, timer: undefined };
      this.#pending.set(id, p);
      if (this.#host.sending()) this.#transmit(p);
    });
  }

  /** Sends every request that waited for the connection. */
  flush() {
    for (const p of this.#pending.values()) if (!p.sent) this.#transmit(p);
  }

  /**
   * An answer frame (`result`, `snapshot`, `presence`, `pong`, `error` with an `id`).
   * Returns false when no request waits for it.
   * @param {any} f
   * @returns {boolean}
   */
  answer(f) {
    const p = f.id !== undefined ? this.#pending.get(String(f.id)) : undefined;
    if (!p) return false;
    this.#pending.delete(String(f.id));
    this.#host.clock.clearTimeout(p.timer);
    if (f.type === 'error') {
      p.reject(new LockhubError(f.code, f.message || f.code));
    } else {
      const { id: _id, type: _type, ...rest } = f;
      p.resolve(rest);
    }
    return true;
  }

  /**
   * The socket ended: those that mean the same after a reconnect (claim, renew,
   * release, takeover, mine) wait to be sent again; the rest fail.
   */
  disconnected() {
    for (const [id, p] of this.#pending) {
      this.#host.clock.clearTimeout(p.timer);
      p.timer = undefined;
      if (p.resend) {
        p.sent = false;
      } else {
        this.#pending.delete(id);
        p.reject(new LockhubError('disconnected', 'lockhub: connection lost'));
      }
    }
  }

  /** Fails every request: the client ended. @param {string} why */
  failAll(why) {
    for (const p of this.#pending.values()) {
      this.#host.clock.clearTimeout(p.timer);
      p.reject(new LockhubError(why, `lockhub: client ${why}`));
    }
    this.#pending.clear();
  }

  /** @param {Pending} p */
  #transmit(p) {
    if (!this.#host.send(p.frame)) return;
    p.sent = true;
    const clock = this.#host.clock;
    clock.clearTimeout(p.timer);
    p.timer = clock.setTimeout(() => {
      const id = /** @type {string} */ (p.frame.id);
      if (this.#pending.get(id) !== p) return;
      this.#pending.delete(id);
      p.reject(new LockhubError('timeout', `lockhub: no answer to ${p.frame.type} in time`));
    }, this.#host.timeoutMs);
  }
}
