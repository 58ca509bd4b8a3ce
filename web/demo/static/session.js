// @ts-check
/**
 * The signed-in person's session: development tokens (POST /dev/token, PROTOCOL.md
 * §6) and calls of the API with them.
 */
import { jwtExpiry } from '/static/lockhub.js';

/** @typedef {import('./users.js').User} User */

/** The entity type of the demo's rows, lockable (`--lockable`, PROTOCOL.md §7). */
export const TYPE = 'ApprovalRequest';

/**
 * An approval request as the API answers it (PROTOCOL.md §5, the demo domain).
 * @typedef {object} Row
 * @property {string} uid
 * @property {string} title
 * @property {string} requester
 * @property {number} amount
 * @property {string} currency
 * @property {'pending'|'approved'|'rejected'} status
 * @property {{oid: string, name: string}|null} decidedBy
 * @property {string|null} decidedAtUtc
 * @property {number} version
 * @property {string} [carrier]
 * @property {string} [origin]
 * @property {string} [destination]
 */

/**
 * The answer to an API call. `status` 0 is a network failure.
 * @typedef {object} ApiResult
 * @property {boolean} ok
 * @property {number} status
 * @property {any} data
 * @property {string|null} etag
 */

/** The tokens and API calls of one person. */
export class Session {
  /** @type {User} */
  #user;
  /** The token given last, and when it expires. @type {{token: string, exp: number|null}|null} */
  #cached = null;
  /** A token fetch under way, shared by every caller meanwhile. @type {Promise<string>|null} */
  #inflight = null;

  /** @param {User} user */
  constructor(user) {
    this.#user = user;
  }

  /**
   * A development token, fetched again when less than 45 s of it is left, or when the
   * server refused it (a restarted development server signs with a new key). The
   * `getToken` of lockhub's connect.
   * @param {{rejected?: boolean}} [why]
   * @returns {Promise<string>}
   */
  getToken(why = {}) {
    if (why.rejected) this.#cached = null;
    const cached = this.#cached;
    if (cached && (cached.exp === null || cached.exp - Date.now() > 45000)) return Promise.resolve(cached.token);
    if (this.#inflight) return this.#inflight;
    const me = this.#user;
    this.#inflight = (async () => {
      try {
        const res = await fetch('/dev/token', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ tenant: me.tenant, oid: me.oid, name: me.name, roles: me.roles }),
        });
        if (!res.ok) throw new Error(`POST /dev/token answered ${res.status}`);
        const { token } = await res.json();
        this.#cached = { token, exp: jwtExpiry(token) };
        return token;
      } finally {
        this.#inflight = null;
      }
    })();
    return this.#inflight;
  }

  /**
   * Calls the API with the bearer token. Never throws: a network failure is status 0.
   * @param {string} method
   * @param {string} path
   * @param {unknown} [body]
   * @param {Record<string, string>} [headers]
   * @param {boolean} [retried]
   * @returns {Promise<ApiResult>}
   */
  async api(method, path, body, headers = {}, retried = false) {
    try {
      const token = await this.getToken({ rejected: retried });
      /** @type {Record<string, string>} */
      const h = { Authorization: `Bearer ${token}`, Accept: 'application/json', ...headers };
      if (body !== undefined) h['Content-Type'] = 'application/json';
      const res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
      // A token the server no longer accepts: once more with a fresh one.
      if (res.status === 401 && !retried) return this.api(method, path, body, headers, true);
      let data = null;
      if (res.status !== 204) {
        try {
          data = await res.json();
        } catch {
          data = null;
        }
      }
      return { ok: res.ok, status: res.status, data, etag: res.headers.get('ETag') };
    } catch (err) {
      return { ok: false, status: 0, data: { code: 'network', message: String(err) }, etag: null };
    }
  }
}
