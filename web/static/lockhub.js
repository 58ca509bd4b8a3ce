// @ts-check
/**
 * lockhub.js: the browser client of lockhub edit locks (PROTOCOL.md §3 and §4).
 *
 * An ES module with no dependencies and no build step. Start with {@link connect}:
 *
 *     import { connect } from '/static/lockhub.js';
 *     const client = connect({ getToken: () => fetchToken() });
 *     client.onStateChange((s) => indicator.dataset.state = s.state);
 *     const grid = client.lockGrid(table, 'ApprovalRequest', 'data-uid');
 *     const form = client.lockForm(formEl, 'ApprovalRequest', 'r-1001');
 *     ...
 *     form.close();   // releases the lock
 *
 * The client keeps one WebSocket to `/ws` (subprotocol `lockhub.v1`). It authenticates
 * with the first frame, refreshes the token in band 30 s before it expires, and
 * reconnects with exponential backoff and full jitter, except after 4403 (forbidden).
 * After a reconnect it authenticates again, watches again (the snapshot makes every
 * map whole) and claims again what it held. Held locks are renewed every `renewMs` of
 * the welcome, and at once when an event shows the lease ending before the next
 * renewal (another tab of the same person closed). On `pagehide` held locks are
 * released over the socket; the hub's release grace covers a tab that dies.
 *
 * Everything runs on the page's one thread; no method blocks. Callbacks are called
 * synchronously from socket and timer events and must not throw (a throwing callback
 * is reported to the console and does not break the client).
 *
 * @module lockhub
 */

/** The WebSocket subprotocol of the contract. */
export const SUBPROTOCOL = 'lockhub.v1';

/** Close codes of PROTOCOL.md §4. */
export const CloseCode = Object.freeze({
  NORMAL: 1000,
  GOING_AWAY: 1001,
  TOO_LARGE: 1009,
  NOT_AUTHENTICATED: 4401,
  FORBIDDEN: 4403,
  AUTH_TIMEOUT: 4408,
  TOO_MANY: 4429,
});

/**
 * The lock record of PROTOCOL.md §1, as carried by every frame.
 * @typedef {object} Lock
 * @property {string} entityType
 * @property {string} entityUid
 * @property {string} holderOid
 * @property {string} holderName
 * @property {string} acquiredAtUtc  RFC 3339
 * @property {string} expiresAtUtc   RFC 3339
 */

/**
 * @typedef {object} Holder
 * @property {string} oid
 * @property {string} name
 */

/**
 * The welcome frame.
 * @typedef {object} Welcome
 * @property {string} connectionId
 * @property {string} tenant
 * @property {Holder} holder
 * @property {number} leaseMs
 * @property {number} renewMs
 * @property {string} serverTime
 * @property {string[]} lockable
 * @property {boolean} canTakeOver
 */

/**
 * The answer to a request: a `result` frame without `id` and `type`.
 * @typedef {object} Result
 * @property {string} [outcome]  acquired, renewed, locked, lost, released, notHeld, takenOver, forbidden, unknown, unwatched, refreshed
 * @property {Lock|null} [lock]
 * @property {Lock[]} [locks]
 * @property {Holder} [previousHolder]
 */

/**
 * A change of a watched type: a lock event of PROTOCOL.md §3, or `Snapshot` when a
 * snapshot replaced the map, or `Expired` with `local: true` when the client hid a lock
 * whose `expiresAtUtc` passed before the hub said so.
 * @typedef {object} Change
 * @property {'Acquired'|'Renewed'|'Released'|'TakenOver'|'Expired'|'Snapshot'} op
 * @property {Lock} [lock]
 * @property {Holder} [previousHolder]
 * @property {string} [at]
 * @property {boolean} [local]
 */

/**
 * @typedef {'connecting'|'open'|'reconnecting'|'closed'|'forbidden'} ConnectionStateName
 */

/**
 * What the connection indicator shows.
 * @typedef {object} ConnectionState
 * @property {ConnectionStateName} state
 *   `connecting` before the first welcome; `open` authenticated; `reconnecting` lost and
 *   retrying; `closed` by {@link LockClient#close}; `forbidden` closed with 4403, no retry.
 * @property {number} attempt     reconnect attempts since the last welcome
 * @property {number} [retryInMs] while reconnecting: the delay before the next attempt
 * @property {number} [code]      the close code that ended the last socket
 * @property {string} [reason]
 */

/**
 * @typedef {object} ConnectOptions
 * @property {(why: TokenRequest) => (string|Promise<string>)} getToken
 *   Returns a JWT. Called before every connection and before the token expires. After
 *   the hub refused the last token (close 4401, e.g. a hub restarted with new signing
 *   keys in development), `why.rejected` is true: do not hand out a cached token then.
 * @property {string} [url]  WebSocket URL. Default: `/ws` of the page's origin.
 * @property {(state: ConnectionState) => void} [onState]  connection-state callback
 * @property {number} [backoffBaseMs]  first reconnect delay cap. Default 500.
 * @property {number} [backoffMaxMs]   largest reconnect delay. Default 10000: an interactive page
 *   should not sit offline for long after its hub is back.
 * @property {number} [refreshBeforeMs] refresh the token this long before it expires. Default 30000.
 * @property {number} [requestTimeoutMs] an unanswered request fails after this. Default 15000.
 * @property {number} [unknownRetryMs] retry a claim answered `unknown` after this. Default 10000.
 * @property {boolean} [styles]  inject the default styles of grids and banners. Default true.
 * @property {(err: unknown) => void} [onError] errors not tied to a request (logged by default)
 */

/**
 * Why the client asks for a token.
 * @typedef {object} TokenRequest
 * @property {'connect'|'refresh'} reason
 * @property {boolean} rejected  the hub refused the token given last (close 4401)
 */

/**
 * An error answering a request: an `error` frame (`code` bad_request, not_lockable,
 * invalid_entity, rate_limited) or a local failure (`disconnected`, `closed`, `timeout`).
 */
export class LockhubError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message);
    this.name = 'LockhubError';
    /** @type {string} */
    this.code = code;
  }
}

// ---------------------------------------------------------------------------------
// Pure helpers, exported so that they can be tested and reused.

/**
 * The reconnect delay of attempt `attempt` (0-based): exponential backoff with full
 * jitter, a uniform random delay in [0, min(maxMs, baseMs·2^attempt)).
 * (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015.)
 * @param {number} attempt
 * @param {number} [baseMs]
 * @param {number} [maxMs]
 * @param {() => number} [random]
 * @returns {number}
 */
export function backoffDelay(attempt, baseMs = 500, maxMs = 10000, random = Math.random) {
  const cap = Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(attempt, 0), 30));
  return Math.floor(random() * cap);
}

/**
 * The expiry of a JWT in Unix milliseconds, read without verifying the token (the
 * client only needs to know when to refresh it), or null when it has none.
 * @param {string} token
 * @returns {number|null}
 */
export function jwtExpiry(token) {
  try {
    const part = String(token).split('.')[1];
    if (!part) return null;
    let b64 = part.replace(/-/g, '+').replace(/_/g, '/');
    while (b64.length % 4) b64 += '=';
    const bin = atob(b64);
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes));
    return typeof claims.exp === 'number' ? claims.exp * 1000 : null;
  } catch {
    return null;
  }
}

/**
 * Whether lock a was acquired after lock b (or b is unknown): tells a lock that replaced
 * ours from a late event about the one ours replaced.
 * @param {Lock} a @param {Lock | null} b
 * @returns {boolean}
 */
function newerThan(a, b) {
  if (!b) return true;
  return !(parseTime(a.acquiredAtUtc) < parseTime(b.acquiredAtUtc));
}

/**
 * Parses an RFC 3339 time as the hub or the .NET service writes it (0 to 9 fractional
 * digits, `Z` or an offset) into Unix milliseconds; NaN when it is not one.
 * @param {string} s
 * @returns {number}
 */
export function parseTime(s) {
  if (typeof s !== 'string') return NaN;
  // Date.parse is only specified for 3 fractional digits; cut the rest.
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/i.exec(s.trim());
  if (!m) return NaN;
  const frac = (m[2] || '').slice(0, 3).padEnd(3, '0');
  return Date.parse(`${m[1]}.${frac}${m[3].toUpperCase()}`);
}

/**
 * Formats a time as the user's local HH:MM (24-hour clock).
 * @param {string|number|Date} t  RFC 3339 string, Unix ms or Date
 * @returns {string}
 */
export function formatClock(t) {
  const ms = typeof t === 'string' ? parseTime(t) : +t;
  if (!Number.isFinite(ms)) return '';
  const d = new Date(ms);
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
}

/**
 * Formats a duration as `4:05` (minutes:seconds) or `1:02:03`; never negative.
 * @param {number} ms
 * @returns {string}
 */
export function formatRemaining(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

/**
 * The banner text of a form held by someone else.
 * @param {Lock} lock
 * @returns {string}
 */
export function lockedByText(lock) {
  return `Locked by ${lock.holderName} since ${formatClock(lock.acquiredAtUtc)} (until ${formatClock(lock.expiresAtUtc)})`;
}

/** @param {string} type @param {string} uid */
function keyOf(type, uid) {
  return `${type}\u0000${uid}`;
}

/**
 * Calls fn, reporting a throw instead of propagating it, so that one broken callback
 * cannot break the client's state machine.
 * @param {Function} fn
 * @param {...unknown} args
 */
function safeCall(fn, ...args) {
  try {
    fn(...args);
  } catch (err) {
    console.error('lockhub: callback failed', err);
  }
}

// ---------------------------------------------------------------------------------
// The client.

/**
 * @typedef {object} Pending
 * @property {Record<string, unknown>} frame
 * @property {(r: any) => void} resolve
 * @property {(e: unknown) => void} reject
 * @property {boolean} resend   send again after a reconnect instead of failing
 * @property {boolean} sent
 * @property {ReturnType<typeof setTimeout>|undefined} timer
 */

/**
 * @typedef {object} TypeState
 * @property {string} type
 * @property {Map<string, Lock>} locks   live locks by entityUid
 * @property {Set<(locks: Map<string, Lock>, change: Change) => void>} subs
 * @property {number} refs       watchers plus holds of the type
 * @property {boolean} synced    a snapshot arrived on the current connection
 * @property {Array<() => void>} waiters  resolved by the next snapshot
 */

/**
 * The state of one entity this client wants to hold.
 *
 * status: `claiming` (no answer yet), `held` (mine), `locked` (someone else's; claimed
 * again when they release or their lease runs out), `takenOver` (taken from me; not
 * claimed again), `unknown` (the store is down: fail open, retried), `released` (the
 * hub released it for me after a write, see {@link LockForm#commit}).
 * @typedef {object} Entry
 * @property {string} key
 * @property {string} type
 * @property {string} uid
 * @property {boolean} want
 * @property {boolean} auto        claim on its own when the entity becomes free
 * @property {'claiming'|'held'|'locked'|'takenOver'|'unknown'|'released'} status
 * @property {Lock|null} lock
 * @property {Holder|null} takenBy
 * @property {string} takenAt
 * @property {string} note         the last notable answer, e.g. `forbidden`
 * @property {Promise<Result>|null} claiming
 * @property {boolean} renewing
 * @property {number} nextRenewAt   client clock, ms
 * @property {number} retryAt       client clock, ms
 * @property {boolean} committing
 * @property {Set<(e: Entry) => void>} listeners
 */

/**
 * A connection to the hub. Create it with {@link connect}.
 */
export class LockClient {
  /** @type {Required<Omit<ConnectOptions, 'onState'|'url'>> & {url: string}} */
  #o;
  /** @type {WebSocket|null} */
  #ws = null;
  #authed = false;
  /** @type {string} the token the current socket authenticated with */
  #token = '';
  /** @type {Welcome|null} */
  #welcome = null;
  #skew = 0; // server clock minus client clock, ms
  #nextId = 1;
  /** @type {Map<string, Pending>} */
  #pending = new Map();
  /** @type {Map<string, TypeState>} */
  #types = new Map();
  /** @type {Map<string, Entry>} */
  #entries = new Map();
  /** @type {Set<(s: ConnectionState) => void>} */
  #stateListeners = new Set();
  /** @type {Set<(w: Welcome) => void>} */
  #welcomeListeners = new Set();
  /** @type {ConnectionState} */
  #state = { state: 'connecting', attempt: 0 };
  #attempt = 0;
  #everOpened = false;
  #tokenRejected = false; // the last socket closed with 4401: ask for a fresh token
  #tokenForced = false; // the current socket's token was asked for after a 4401
  #closed = false;
  #suspended = false; // the page is in the back/forward cache
  /** @type {ReturnType<typeof setTimeout>|undefined} */
  #reconnectTimer;
  /** @type {ReturnType<typeof setTimeout>|undefined} */
  #refreshTimer;
  /** @type {ReturnType<typeof setInterval>|undefined} */
  #ticker;
  /** @type {(w: Welcome) => void} */
  #resolveReady = () => {};
  /** Resolves with the first welcome. */
  ready;

  /** @param {ConnectOptions} opts */
  constructor(opts) {
    if (!opts || typeof opts.getToken !== 'function') {
      throw new TypeError('lockhub: connect needs a getToken function');
    }
    this.#o = {
      url: opts.url || defaultURL(),
      getToken: opts.getToken,
      backoffBaseMs: opts.backoffBaseMs ?? 500,
      backoffMaxMs: opts.backoffMaxMs ?? 10000,
      refreshBeforeMs: opts.refreshBeforeMs ?? 30000,
      requestTimeoutMs: opts.requestTimeoutMs ?? 15000,
      unknownRetryMs: opts.unknownRetryMs ?? 10000,
      styles: opts.styles ?? true,
      onError: opts.onError ?? ((err) => console.warn('lockhub:', err)),
    };
    /** @type {Promise<Welcome>} */
    this.ready = new Promise((resolve) => {
      this.#resolveReady = resolve;
    });
    if (opts.onState) {
      this.#stateListeners.add(opts.onState);
      safeCall(opts.onState, this.state);
    }
    if (this.#o.styles) injectStyles();
    if (typeof window !== 'undefined') {
      window.addEventListener('pagehide', this.#onPageHide);
      window.addEventListener('pageshow', this.#onPageShow);
      window.addEventListener('online', this.#onOnline);
    }
    this.#ticker = setInterval(() => this.#tick(), 500);
    void this.#open();
  }

  // ------------------------------------------------------------------ public surface

  /** The current connection state. @returns {ConnectionState} */
  get state() {
    return { ...this.#state };
  }

  /** The last welcome, or null before the first. @returns {Welcome|null} */
  get welcome() {
    return this.#welcome;
  }

  /** Who this client is (from the welcome), or null before it. @returns {Holder|null} */
  get me() {
    return this.#welcome ? this.#welcome.holder : null;
  }

  /** Whether the welcome grants the takeover role. */
  get canTakeOver() {
    return !!(this.#welcome && this.#welcome.canTakeOver);
  }

  /** The client's estimate of the server's clock, in Unix ms. */
  now() {
    return Date.now() + this.#skew;
  }

  /**
   * Calls fn with every connection state change (and at once with the current one).
   * @param {(s: ConnectionState) => void} fn
   * @returns {() => void} unsubscribe
   */
  onStateChange(fn) {
    this.#stateListeners.add(fn);
    safeCall(fn, this.state);
    return () => this.#stateListeners.delete(fn);
  }

  /**
   * Calls fn with every welcome: the first, and each after a reconnect.
   * @param {(w: Welcome) => void} fn
   * @returns {() => void} unsubscribe
   */
  onWelcome(fn) {
    this.#welcomeListeners.add(fn);
    if (this.#welcome && this.#authed) safeCall(fn, this.#welcome);
    return () => this.#welcomeListeners.delete(fn);
  }

  /**
   * Claims a lock. An `acquired` or `renewed` lock is then held: renewed, claimed again
   * after a reconnect, and released by {@link LockClient#release}, pagehide or close.
   * Waits for the connection when there is none.
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  claim(type, uid) {
    const e = this.#entry(type, uid, false);
    e.want = true;
    return this.#claimEntry(e, 'claim');
  }

  /**
   * Takes a lock over (the welcome must say `canTakeOver`). The lock is then held.
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  takeover(type, uid) {
    const e = this.#entry(type, uid, false);
    e.want = true;
    return this.#claimEntry(e, 'takeover');
  }

  /**
   * Renews a lock now (held locks are renewed on their own).
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  renew(type, uid) {
    const e = this.#entries.get(keyOf(type, uid));
    if (e && e.want) return this.#renewEntry(e);
    return this.#request({ type: 'renew', entityType: type, entityUid: uid });
  }

  /**
   * Releases a lock and forgets it (no more renewals or re-claims).
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  release(type, uid) {
    const e = this.#entries.get(keyOf(type, uid));
    if (e) this.#dropEntry(e, false);
    return this.#request({ type: 'release', entityType: type, entityUid: uid });
  }

  /** The caller's live locks, from the hub. @returns {Promise<Lock[]>} */
  async mine() {
    const r = await this.#request({ type: 'mine' });
    return r.locks || [];
  }

  /**
   * The locks this client holds now (status `held`).
   * @returns {Lock[]}
   */
  held() {
    /** @type {Lock[]} */
    const out = [];
    for (const e of this.#entries.values()) if (e.status === 'held' && e.lock) out.push(e.lock);
    return out;
  }

  /**
   * Watches a type: keeps a live map of its locks by entityUid from the snapshot and
   * the lock events, and calls onChange after every change with the map and what
   * changed. A lock is dropped from the map once its `expiresAtUtc` passes, even before
   * the hub's `Expired` arrives. After a reconnect, or an unsolicited snapshot (the hub
   * lost Redis and got it back), the snapshot replaces the map.
   * @param {string} type
   * @param {(locks: Map<string, Lock>, change: Change) => void} [onChange]
   * @returns {Watch}
   */
  watch(type, onChange) {
    const t = this.#ref(type);
    const fn = onChange || (() => {});
    t.subs.add(fn);
    if (t.synced) safeCall(fn, t.locks, { op: 'Snapshot' });
    let closed = false;
    return {
      type,
      get locks() {
        return t.locks;
      },
      get: (uid) => t.locks.get(uid),
      synced: () =>
        t.synced && this.#authed ? Promise.resolve() : new Promise((r) => t.waiters.push(r)),
      close: () => {
        if (closed) return;
        closed = true;
        t.subs.delete(fn);
        this.#unref(type);
      },
    };
  }

  /**
   * Sends a request frame and resolves with its answer (`result` or `snapshot`, without
   * `id` and `type`); rejects with a {@link LockhubError} on an `error` frame. For frame
   * types this client has no method for.
   * @param {Record<string, unknown>} frame
   * @returns {Promise<any>}
   */
  request(frame) {
    return this.#request(frame);
  }

  /**
   * Ends the client: releases what it holds, closes the socket, stops every timer.
   */
  close() {
    if (this.#closed) return;
    for (const e of [...this.#entries.values()]) this.#dropEntry(e, true);
    this.#closed = true;
    this.#shutdown('closed');
    if (this.#ws) {
      try {
        this.#ws.close(CloseCode.NORMAL, 'client closed');
      } catch {
        /* already closing */
      }
      this.#ws = null;
    }
    this.#setState({ state: 'closed', attempt: 0 });
  }

  // ------------------------------------------------------------------ form and grid

  /**
   * Locks a detail form while it is open. See {@link LockForm}.
   * @param {HTMLElement} element  the form (or its container)
   * @param {string} type
   * @param {string} uid
   * @param {LockFormOptions} [options]
   * @returns {LockForm}
   */
  lockForm(element, type, uid, options = {}) {
    return new LockForm(this, element, type, uid, options);
  }

  /**
   * Shows the locks of a type in a table. See {@link LockGrid}.
   * @param {HTMLTableElement} table
   * @param {string} type
   * @param {string|((row: HTMLTableRowElement) => string|null|undefined)} rowUid
   *   the row attribute holding the entity uid (e.g. `data-uid`), or a function of the row
   * @param {LockGridOptions} [options]
   * @returns {LockGrid}
   */
  lockGrid(table, type, rowUid, options = {}) {
    return new LockGrid(this, table, type, rowUid, options);
  }

  // ------------------------------------------------------------------ holds (internal API of LockForm)

  /**
   * Wants a lock until the returned function is called: claims it, claims it again
   * when it becomes free (auto), and reports every change of its state to fn.
   * @param {string} type
   * @param {string} uid
   * @param {(e: Entry) => void} fn
   * @returns {{entry: Entry, takeover: () => Promise<Result>, commit: <T>(w: () => Promise<T>, ok: (v: T) => boolean) => Promise<T>, drop: (release?: boolean) => void}}
   * @ignore
   */
  _hold(type, uid, fn) {
    const e = this.#entry(type, uid, true);
    e.auto = true;
    e.want = true;
    e.listeners.add(fn);
    if (e.status === 'takenOver' || e.status === 'released') {
      e.status = 'claiming';
      e.takenBy = null;
    }
    if (e.status !== 'held') void this.#claimEntry(e, 'claim').catch(() => {});
    return {
      entry: e,
      takeover: () => {
        e.want = true;
        e.note = '';
        return this.#claimEntry(e, 'takeover');
      },
      commit: async (write, ok) => {
        e.committing = true;
        let v;
        try {
          v = await write();
        } catch (err) {
          e.committing = false;
          this.#afterCommitFailed(e);
          throw err;
        }
        e.committing = false;
        if (ok(v)) {
          // PROTOCOL.md §5: a successful approve or reject releases the caller's lock.
          e.status = 'released';
          e.want = false;
        } else {
          this.#afterCommitFailed(e);
        }
        return v;
      },
      drop: (release = true) => {
        e.listeners.delete(fn);
        if (e.listeners.size === 0) this.#dropEntry(e, release);
      },
    };
  }

  // ------------------------------------------------------------------ connection

  async #open() {
    if (this.#closed || this.#suspended) return;
    this.#reconnectTimer = undefined;
    this.#setState({
      state: this.#everOpened ? 'reconnecting' : 'connecting',
      attempt: this.#attempt,
    });
    let token;
    try {
      token = await this.#o.getToken({ reason: 'connect', rejected: this.#tokenRejected });
      if (typeof token !== 'string' || token === '') throw new Error('getToken returned no token');
      this.#tokenForced = this.#tokenRejected;
      this.#tokenRejected = false;
    } catch (err) {
      this.#o.onError(err);
      this.#scheduleReconnect(0, 'no token');
      return;
    }
    if (this.#closed || this.#suspended) return;
    let ws;
    try {
      ws = new WebSocket(this.#o.url, SUBPROTOCOL);
    } catch (err) {
      this.#o.onError(err);
      this.#scheduleReconnect(0, 'bad url');
      return;
    }
    this.#ws = ws;
    this.#authed = false;
    this.#token = token;
    ws.onopen = () => {
      if (ws !== this.#ws) return;
      ws.send(JSON.stringify({ type: 'auth', token }));
    };
    ws.onmessage = (ev) => {
      if (ws !== this.#ws) return;
      this.#onMessage(ev.data);
    };
    ws.onclose = (ev) => {
      if (ws !== this.#ws) return;
      this.#onClose(ev.code, ev.reason);
    };
    ws.onerror = () => {
      /* onclose follows with the code */
    };
  }

  /**
   * @param {number} code
   * @param {string} reason
   * @param {boolean} [now]  at once, without counting an attempt
   */
  #scheduleReconnect(code, reason, now = false) {
    if (this.#closed || this.#suspended || this.#reconnectTimer !== undefined) return;
    const delay = now ? 0 : backoffDelay(this.#attempt, this.#o.backoffBaseMs, this.#o.backoffMaxMs);
    if (!now) this.#attempt++;
    this.#setState({ state: 'reconnecting', attempt: this.#attempt, retryInMs: delay, code, reason });
    this.#reconnectTimer = setTimeout(() => void this.#open(), delay);
  }

  /** @param {number} code @param {string} reason */
  #onClose(code, reason) {
    this.#ws = null;
    const wasAuthed = this.#authed;
    this.#authed = false;
    clearTimeout(this.#refreshTimer);
    for (const t of this.#types.values()) t.synced = false;
    // Requests in flight: those that mean the same after a reconnect are sent again
    // (claim, renew, release, takeover, mine); the rest fail.
    for (const [id, p] of this.#pending) {
      clearTimeout(p.timer);
      p.timer = undefined;
      if (p.resend) {
        p.sent = false;
      } else {
        this.#pending.delete(id);
        p.reject(new LockhubError('disconnected', 'lockhub: connection lost'));
      }
    }
    // 4401: the token expired or the hub does not know its key (a development hub
    // restarted). The hub is there: retry at once with a fresh token, and back off only
    // when a fresh token is refused too.
    let now = false;
    if (code === CloseCode.NOT_AUTHENTICATED) {
      now = !this.#tokenForced;
      this.#tokenRejected = true;
    }
    if (code === CloseCode.FORBIDDEN) {
      // An origin not allowed or an identity change: retrying cannot help.
      this.#closed = true;
      this.#shutdown('forbidden');
      this.#setState({ state: 'forbidden', attempt: this.#attempt, code, reason });
      return;
    }
    if (this.#closed) return;
    if (this.#suspended) {
      this.#setState({ state: 'reconnecting', attempt: this.#attempt, code, reason });
      return;
    }
    // A hub going away (1001) was healthy a moment ago: come back fast.
    if (code === CloseCode.GOING_AWAY && wasAuthed) this.#attempt = 0;
    this.#scheduleReconnect(code, reason, now);
  }

  /** @param {unknown} data */
  #onMessage(data) {
    if (typeof data !== 'string') return;
    /** @type {any} */
    let f;
    try {
      f = JSON.parse(data);
    } catch {
      this.#o.onError(new Error('lockhub: a frame that is not JSON'));
      return;
    }
    if (!f || typeof f !== 'object') return;
    if (!this.#authed) {
      if (f.type === 'welcome') this.#onWelcome(f);
      else if (f.type === 'error') this.#o.onError(new LockhubError(f.code, f.message));
      return;
    }
    switch (f.type) {
      case 'result':
      case 'snapshot':
      case 'error': {
        if (f.type === 'snapshot' && f.id === undefined) {
          this.#applySnapshot(f.entityType, f.locks || []);
          return;
        }
        const p = f.id !== undefined ? this.#pending.get(String(f.id)) : undefined;
        if (!p) {
          if (f.type === 'error') this.#o.onError(new LockhubError(f.code, f.message));
          return;
        }
        this.#pending.delete(String(f.id));
        clearTimeout(p.timer);
        if (f.type === 'error') {
          p.reject(new LockhubError(f.code, f.message || f.code));
        } else {
          const { id: _id, type: _type, ...rest } = f;
          p.resolve(rest);
        }
        return;
      }
      case 'lock':
        this.#onLockEvent(f);
        return;
      default:
        // Frames this version does not know are ignored (the contract may grow).
        return;
    }
  }

  /** @param {Welcome} w */
  #onWelcome(w) {
    this.#welcome = w;
    const st = parseTime(w.serverTime);
    this.#skew = Number.isFinite(st) ? st - Date.now() : 0;
    this.#authed = true;
    this.#tokenForced = false; // the token was good
    this.#attempt = 0;
    this.#everOpened = true;
    this.#setState({ state: 'open', attempt: 0 });
    this.#scheduleRefresh(this.#token);
    // Re-watch (the snapshot makes the maps whole), re-claim what is wanted, then send
    // what waited for the connection.
    for (const t of this.#types.values()) if (t.refs > 0) this.#sendWatch(t);
    for (const e of this.#entries.values()) {
      if (e.want && !e.claiming && e.status !== 'takenOver') {
        void this.#claimEntry(e, 'claim').catch(() => {});
      }
    }
    for (const p of this.#pending.values()) if (!p.sent) this.#transmit(p);
    this.#resolveReady(w);
    for (const fn of this.#welcomeListeners) safeCall(fn, w);
    for (const e of this.#entries.values()) this.#notify(e);
  }

  /** @param {string} token */
  #scheduleRefresh(token) {
    clearTimeout(this.#refreshTimer);
    const exp = jwtExpiry(token);
    if (exp === null) return;
    const delay = Math.max(1000, exp - this.#o.refreshBeforeMs - this.now());
    this.#refreshTimer = setTimeout(() => void this.#refresh(), Math.min(delay, 2 ** 31 - 1));
  }

  async #refresh() {
    if (!this.#authed || this.#closed) return;
    const ws = this.#ws;
    try {
      const token = await this.#o.getToken({ reason: 'refresh', rejected: false });
      if (ws !== this.#ws || !this.#authed) return;
      const r = await this.#request({ type: 'auth', token }, false);
      if (r.outcome === 'refreshed' && ws === this.#ws) {
        this.#token = token;
        this.#scheduleRefresh(token);
      }
    } catch (err) {
      this.#o.onError(err);
      // The hub closes an expired socket with 4401 and the reconnect takes a fresh
      // token; meanwhile try again shortly.
      if (ws === this.#ws && this.#authed) {
        clearTimeout(this.#refreshTimer);
        this.#refreshTimer = setTimeout(() => void this.#refresh(), 5000);
      }
    }
  }

  /** @param {string} why */
  #shutdown(why) {
    clearTimeout(this.#reconnectTimer);
    clearTimeout(this.#refreshTimer);
    clearInterval(this.#ticker);
    this.#reconnectTimer = undefined;
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(new LockhubError(why, `lockhub: client ${why}`));
    }
    this.#pending.clear();
    if (typeof window !== 'undefined') {
      window.removeEventListener('pagehide', this.#onPageHide);
      window.removeEventListener('pageshow', this.#onPageShow);
      window.removeEventListener('online', this.#onOnline);
    }
  }

  /** @param {ConnectionState} s */
  #setState(s) {
    const prev = this.#state;
    this.#state = s;
    if (prev.state === s.state && prev.attempt === s.attempt && prev.retryInMs === s.retryInMs) return;
    for (const fn of this.#stateListeners) safeCall(fn, { ...s });
  }

  #onPageHide = (/** @type {PageTransitionEvent} */ ev) => {
    // Release what this page holds: the tab is going away (or into the back/forward
    // cache). A beacon cannot carry the token; the open socket can. The hub lets go of
    // this socket's share only: another tab of the same person keeps the lock.
    const ws = this.#ws;
    for (const e of this.#entries.values()) {
      if (e.status !== 'held') continue;
      if (ws && this.#authed && ws.readyState === WebSocket.OPEN) {
        ws.send(JSON.stringify({ id: String(this.#nextId++), type: 'release', entityType: e.type, entityUid: e.uid }));
      }
      e.status = 'claiming'; // claimed again if the page comes back
    }
    if (ev && ev.persisted) {
      this.#suspended = true;
      clearTimeout(this.#reconnectTimer);
      this.#reconnectTimer = undefined;
      if (ws) ws.close(CloseCode.NORMAL, 'pagehide');
    }
  };

  #onPageShow = (/** @type {PageTransitionEvent} */ ev) => {
    if (!ev.persisted || !this.#suspended) return;
    this.#suspended = false;
    this.#attempt = 0;
    if (!this.#ws) void this.#open();
  };

  #onOnline = () => {
    if (this.#closed || this.#ws || this.#reconnectTimer === undefined) return;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    void this.#open();
  };

  // ------------------------------------------------------------------ requests

  /**
   * @param {Record<string, unknown>} frame
   * @param {boolean} [resend]
   * @returns {Promise<any>}
   */
  #request(frame, resend = true) {
    if (this.#closed) {
      return Promise.reject(new LockhubError('closed', 'lockhub: client closed'));
    }
    const id = String(this.#nextId++);
    return new Promise((resolve, reject) => {
      /** @type {Pending} */
      const p = { frame: { ...frame, id }, resolve, reject, resend, sent: false, timer: undefined };
      this.#pending.set(id, p);
      if (this.#authed) this.#transmit(p);
    });
  }

  /** @param {Pending} p */
  #transmit(p) {
    const ws = this.#ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    ws.send(JSON.stringify(p.frame));
    p.sent = true;
    clearTimeout(p.timer);
    p.timer = setTimeout(() => {
      const id = /** @type {string} */ (p.frame.id);
      if (this.#pending.get(id) !== p) return;
      this.#pending.delete(id);
      p.reject(new LockhubError('timeout', `lockhub: no answer to ${p.frame.type} in time`));
    }, this.#o.requestTimeoutMs);
  }

  // ------------------------------------------------------------------ watches

  /** @param {string} type */
  #ref(type) {
    let t = this.#types.get(type);
    if (!t) {
      t = { type, locks: new Map(), subs: new Set(), refs: 0, synced: false, waiters: [] };
      this.#types.set(type, t);
    }
    t.refs++;
    if (t.refs === 1 && this.#authed) this.#sendWatch(t);
    return t;
  }

  /** @param {string} type */
  #unref(type) {
    const t = this.#types.get(type);
    if (!t) return;
    t.refs--;
    if (t.refs > 0) return;
    this.#types.delete(type);
    if (this.#authed) void this.#request({ type: 'unwatch', entityType: type }, false).catch(() => {});
  }

  /** @param {TypeState} t */
  #sendWatch(t) {
    const ws = this.#ws;
    this.#request({ type: 'watch', entityType: t.type }, false).then(
      (snap) => {
        if (ws === this.#ws && this.#types.get(t.type) === t) this.#applySnapshot(t.type, snap.locks || []);
      },
      (err) => {
        if (err instanceof LockhubError && (err.code === 'disconnected' || err.code === 'closed')) return;
        this.#o.onError(err);
      },
    );
  }

  /** @param {string} type @param {Lock[]} locks */
  #applySnapshot(type, locks) {
    const t = this.#types.get(type);
    if (!t) return;
    const now = this.now();
    t.locks = new Map();
    for (const l of locks) {
      if (l && parseTime(l.expiresAtUtc) > now) t.locks.set(l.entityUid, l);
    }
    t.synced = true;
    const waiters = t.waiters.splice(0);
    for (const r of waiters) r();
    for (const fn of t.subs) safeCall(fn, t.locks, { op: 'Snapshot' });
    // Holds learn from the snapshot too: a lock that blocked us may be gone.
    for (const e of this.#entries.values()) {
      if (e.type !== type || !e.want) continue;
      const l = t.locks.get(e.uid);
      if (e.status === 'locked' && !l && e.auto) void this.#claimEntry(e, 'claim').catch(() => {});
      else if (e.status === 'locked' && l && l.holderOid !== this.me?.oid) {
        e.lock = l;
        this.#notify(e);
      } else if (e.status === 'held' && l && l.holderOid !== this.me?.oid && newerThan(l, e.lock)) {
        this.#lostTo(e, l);
      } else if (e.status === 'held' && !l && !e.claiming) {
        // Ours is gone (Redis came back empty): claim it again before anyone else.
        void this.#claimEntry(e, 'claim').catch(() => {});
      }
    }
  }

  /** @param {{op: Change['op'], lock: Lock, previousHolder?: Holder, at?: string}} ev */
  #onLockEvent(ev) {
    const l = ev.lock;
    if (!l || typeof l.entityUid !== 'string') return;
    const t = this.#types.get(l.entityType);
    if (t) {
      const gone = ev.op === 'Released' || ev.op === 'Expired' || !(parseTime(l.expiresAtUtc) > this.now());
      if (gone) {
        const cur = t.locks.get(l.entityUid);
        // Events of one entity arrive in order; still, never drop a newer holder's lock.
        if (cur && (cur.holderOid === l.holderOid || ev.op === 'Expired')) t.locks.delete(l.entityUid);
      } else {
        t.locks.set(l.entityUid, l);
      }
      /** @type {Change} */
      const change = { op: ev.op, lock: l, at: ev.at };
      if (ev.previousHolder) change.previousHolder = ev.previousHolder;
      for (const fn of t.subs) safeCall(fn, t.locks, change);
    }
    const e = this.#entries.get(keyOf(l.entityType, l.entityUid));
    if (e) this.#entryEvent(e, ev);
  }

  // ------------------------------------------------------------------ entries

  /** @param {string} type @param {string} uid @param {boolean} auto */
  #entry(type, uid, auto) {
    const key = keyOf(type, uid);
    let e = this.#entries.get(key);
    if (!e) {
      e = {
        key, type, uid, want: false, auto, status: 'claiming', lock: null, takenBy: null, takenAt: '',
        note: '', claiming: null, renewing: false, nextRenewAt: 0, retryAt: 0, committing: false,
        listeners: new Set(),
      };
      this.#entries.set(key, e);
      this.#ref(type); // holds need the type's events (Released, TakenOver, ...)
    }
    return e;
  }

  /**
   * The entry held its lock and learned that someone else holds it now: as after a
   * TakenOver, stop renewing, do not claim again, and tell the form who has it.
   * @param {Entry} e @param {Lock} l @param {string} [at]
   */
  #lostTo(e, l, at) {
    e.status = 'takenOver';
    e.want = false;
    e.lock = l;
    e.takenBy = { oid: l.holderOid, name: l.holderName };
    e.takenAt = at || new Date(this.now()).toISOString();
    this.#notify(e);
  }

  /** @param {Entry} e @param {boolean} release */
  #dropEntry(e, release) {
    if (this.#entries.get(e.key) !== e) return;
    this.#entries.delete(e.key);
    const held = e.status === 'held' || e.claiming !== null;
    e.want = false;
    e.listeners.clear();
    if (release && held && !this.#closed) {
      void this.#request({ type: 'release', entityType: e.type, entityUid: e.uid }).catch(() => {});
    }
    this.#unref(e.type);
  }

  /**
   * @param {Entry} e
   * @param {'claim'|'takeover'} op
   * @returns {Promise<Result>}
   */
  #claimEntry(e, op) {
    if (e.claiming && op === 'claim') return e.claiming;
    const p = this.#request({ type: op, entityType: e.type, entityUid: e.uid }).then(
      (r) => {
        if (e.claiming === p) e.claiming = null;
        this.#applyClaim(e, r, op);
        return r;
      },
      (err) => {
        if (e.claiming === p) e.claiming = null;
        if (err instanceof LockhubError && err.code === 'timeout' && e.want) {
          e.retryAt = Date.now() + 1000;
        } else if (e.want && e.auto && this.#entries.get(e.key) === e) {
          // bad_request, not_lockable, invalid_entity: a page bug. Say so loudly, leave
          // the form editable (the API edge still guards writes), and stop.
          this.#o.onError(err);
          e.note = err instanceof LockhubError ? err.code : 'error';
          e.want = false;
          e.status = 'unknown';
          this.#notify(e);
        }
        throw err;
      },
    );
    e.claiming = p;
    if (e.status !== 'held') {
      e.status = e.status === 'locked' ? 'locked' : 'claiming';
    }
    return p;
  }

  /** @param {Entry} e @param {Result} r @param {'claim'|'takeover'} op */
  #applyClaim(e, r, op) {
    const current = this.#entries.get(e.key) === e;
    const got = r.outcome === 'acquired' || r.outcome === 'renewed' || r.outcome === 'takenOver';
    if (!current || !e.want) {
      // Closed while the claim was on its way. A dropped entry has sent its release
      // already (#dropEntry, behind this claim on the wire); a second one could free
      // the lock of a form reopened on the same record meanwhile.
      if (got && current && !this.#closed) {
        void this.#request({ type: 'release', entityType: e.type, entityUid: e.uid }).catch(() => {});
      }
      return;
    }
    e.note = '';
    if (got) {
      e.status = 'held';
      e.lock = r.lock || null;
      e.takenBy = null;
      e.nextRenewAt = Date.now() + this.#renewMs();
    } else if (r.outcome === 'locked' && e.status === 'held' && r.lock) {
      // Re-claimed (after a reconnect) and someone else has it: we lost it while
      // editing, whatever event we missed. Tell who, and stop.
      this.#lostTo(e, r.lock);
      return;
    } else if (r.outcome === 'locked' || r.outcome === 'forbidden') {
      if (r.outcome === 'forbidden') e.note = 'forbidden';
      e.status = 'locked';
      e.lock = r.lock || null;
      if (!e.lock && e.auto) {
        // Forbidden on a free entity: claim it the ordinary way.
        void this.#claimEntry(e, 'claim').catch(() => {});
        return;
      }
      if (!e.auto) {
        this.#dropEntry(e, false);
        return;
      }
    } else if (r.outcome === 'unknown') {
      // Fail open (PROTOCOL.md §2): edit without a lock, ask again later.
      e.status = 'unknown';
      e.lock = null;
      e.retryAt = Date.now() + Math.min(this.#o.unknownRetryMs, this.#renewMs());
    } else {
      this.#o.onError(new Error(`lockhub: unexpected ${op} outcome ${r.outcome}`));
      return;
    }
    this.#notify(e);
  }

  /** @param {Entry} e @returns {Promise<Result>} */
  #renewEntry(e) {
    e.renewing = true;
    e.nextRenewAt = Date.now() + this.#renewMs();
    return this.#request({ type: 'renew', entityType: e.type, entityUid: e.uid }).then(
      (r) => {
        e.renewing = false;
        if (this.#entries.get(e.key) !== e || !e.want || e.status !== 'held') return r;
        if (r.outcome === 'renewed') {
          e.lock = r.lock || e.lock;
          this.#notify(e);
        } else if (r.outcome === 'lost') {
          const l = r.lock || null;
          if (l && l.holderOid !== this.me?.oid) {
            this.#lostTo(e, l);
          } else {
            e.status = 'claiming';
            void this.#claimEntry(e, 'claim').catch(() => {});
          }
        } else if (r.outcome === 'unknown') {
          // The store is down; the lease may still run. Try again soon.
          e.nextRenewAt = Date.now() + Math.min(this.#o.unknownRetryMs, this.#renewMs());
        }
        return r;
      },
      (err) => {
        e.renewing = false;
        e.nextRenewAt = Date.now() + 1000;
        throw err;
      },
    );
  }

  #afterCommitFailed(/** @type {Entry} */ e) {
    if (this.#entries.get(e.key) !== e) return;
    if (e.status === 'released') {
      e.status = 'claiming';
      e.want = true;
      void this.#claimEntry(e, 'claim').catch(() => {});
    }
  }

  /**
   * @param {Entry} e
   * @param {{op: Change['op'], lock: Lock, previousHolder?: Holder, at?: string}} ev
   */
  #entryEvent(e, ev) {
    const me = this.me?.oid;
    const mine = ev.lock.holderOid === me;
    switch (ev.op) {
      case 'Acquired':
      case 'Renewed':
      case 'TakenOver':
        if (ev.op === 'TakenOver' && !mine && e.status === 'held' && ev.previousHolder?.oid === me) {
          // Taken from me: stop renewing, do not claim again; the form turns read-only.
          this.#lostTo(e, ev.lock, ev.at);
          return;
        }
        if (mine) {
          if (e.status === 'held') {
            e.lock = ev.lock;
            // The lease ends before our next renewal (another tab of mine closed and
            // the hub shortened the lease to its grace): renew at once.
            const expiresLocal = parseTime(ev.lock.expiresAtUtc) - this.#skew;
            if (expiresLocal - 2000 < e.nextRenewAt && !e.renewing) void this.#renewEntry(e).catch(() => {});
            this.#notify(e);
          } else if (e.want && e.status !== 'takenOver' && !e.claiming) {
            // Another tab of mine holds it: a claim makes it ours here too (renewed).
            void this.#claimEntry(e, 'claim').catch(() => {});
          }
          return;
        }
        if (e.status === 'held' && e.want) {
          // Someone else's lock, newer than ours: we missed the TakenOver or the end of
          // our lease. An older one is a late event from before our claim: ignore it.
          if (newerThan(ev.lock, e.lock)) this.#lostTo(e, ev.lock, ev.at);
          return;
        }
        if (e.status === 'locked' || e.status === 'claiming' || e.status === 'unknown') {
          if (!e.want) return;
          e.status = 'locked';
          e.lock = ev.lock;
          this.#notify(e);
        }
        return;
      case 'Released':
      case 'Expired':
        if (e.committing) {
          if (mine) e.status = 'released';
          return;
        }
        if (!e.want || e.status === 'takenOver' || e.status === 'released') return;
        if (e.status === 'locked' && e.lock && e.lock.holderOid !== ev.lock.holderOid) return; // an older holder
        if (e.status === 'locked' && !e.auto) return;
        e.status = e.status === 'locked' ? 'locked' : 'claiming';
        void this.#claimEntry(e, 'claim').catch(() => {});
        return;
      default:
        return;
    }
  }

  /** @param {Entry} e */
  #notify(e) {
    for (const fn of e.listeners) safeCall(fn, e);
  }

  #renewMs() {
    const w = this.#welcome;
    return w && w.renewMs > 0 ? w.renewMs : 120000;
  }

  #tick() {
    const now = this.now();
    const local = Date.now();
    // Hide locks whose lease ran out, even before Expired arrives.
    for (const t of this.#types.values()) {
      for (const [uid, l] of t.locks) {
        if (parseTime(l.expiresAtUtc) <= now) {
          t.locks.delete(uid);
          for (const fn of t.subs) safeCall(fn, t.locks, { op: 'Expired', lock: l, local: true });
        }
      }
    }
    if (!this.#authed) return;
    for (const e of this.#entries.values()) {
      if (!e.want) continue;
      if (e.status === 'held') {
        if (!e.renewing && local >= e.nextRenewAt) void this.#renewEntry(e).catch(() => {});
      } else if (e.status === 'locked') {
        // The holder's lease ran out and no event said so (yet): try.
        if (e.auto && !e.claiming && e.lock && parseTime(e.lock.expiresAtUtc) <= now) {
          void this.#claimEntry(e, 'claim').catch(() => {});
        }
      } else if (e.status === 'unknown' || (e.status === 'claiming' && e.retryAt)) {
        if (!e.claiming && e.retryAt && local >= e.retryAt) {
          e.retryAt = 0;
          void this.#claimEntry(e, 'claim').catch(() => {});
        }
      }
    }
  }
}

/**
 * Opens a client. See {@link LockClient}.
 * @param {ConnectOptions} opts
 * @returns {LockClient}
 */
export function connect(opts) {
  return new LockClient(opts);
}

function defaultURL() {
  const l = window.location;
  return `${l.protocol === 'https:' ? 'wss:' : 'ws:'}//${l.host}/ws`;
}

/**
 * @typedef {object} Watch
 * @property {string} type
 * @property {Map<string, Lock>} locks  the live map, by entityUid
 * @property {(uid: string) => Lock|undefined} get
 * @property {() => Promise<void>} synced  resolves when a snapshot arrived on the current connection
 * @property {() => void} close
 */

// ---------------------------------------------------------------------------------
// The form.

/**
 * @typedef {object} LockFormOptions
 * @property {HTMLElement} [body]
 *   The part that goes inert while someone else holds the lock. Default: the element's
 *   `[data-lockhub-body]`, else the element itself.
 * @property {HTMLElement} [banner]
 *   Where the banner is drawn. Default: a new element placed just before the body.
 * @property {boolean} [takeover]  offer "Take over" (default: when the welcome says canTakeOver)
 * @property {(form: LockForm) => void} [onChange]  after every state change
 */

/**
 * @typedef {'claiming'|'held'|'locked'|'takenOver'|'unknown'|'released'|'closed'} FormState
 */

/**
 * Keeps a detail form locked while it is open.
 *
 * It claims the lock at once. When someone else holds it, the body goes `inert` and a
 * banner says "Locked by NAME since HH:MM (until HH:MM)"; when they release or their
 * lease runs out, the form claims on its own and the banner goes away. On TakenOver
 * the banner says who took it and the form turns read-only for good. When the store is
 * down (`unknown`) the form stays editable with a quiet note. The element carries
 * `data-lock-state` with the {@link FormState}.
 */
export class LockForm {
  /** @type {LockClient} */ #client;
  /** @type {HTMLElement} */ #el;
  /** @type {HTMLElement} */ #body;
  /** @type {HTMLElement} */ #banner;
  /** @type {HTMLElement} */ #text;
  /** @type {HTMLButtonElement} */ #button;
  #ownBanner = false;
  /** @type {LockFormOptions} */ #opts;
  /** @type {ReturnType<LockClient['_hold']>} */ #hold;
  /** @type {FormState} */ #state = 'claiming';
  /** @type {Array<() => void>} */ #restore = [];
  #unsubWelcome;
  #closed = false;
  #busy = false;

  /**
   * @param {LockClient} client
   * @param {HTMLElement} element
   * @param {string} type
   * @param {string} uid
   * @param {LockFormOptions} opts
   */
  constructor(client, element, type, uid, opts) {
    this.#client = client;
    this.#el = element;
    this.#opts = opts;
    this.type = type;
    this.uid = uid;
    this.#body = opts.body || /** @type {HTMLElement|null} */ (element.querySelector('[data-lockhub-body]')) || element;
    if (opts.banner) {
      this.#banner = opts.banner;
    } else {
      this.#banner = document.createElement('div');
      this.#ownBanner = true;
      this.#body.before(this.#banner);
    }
    this.#banner.classList.add('lockhub-banner');
    this.#banner.setAttribute('role', 'status');
    this.#banner.setAttribute('aria-live', 'polite');
    this.#banner.setAttribute('tabindex', '-1');
    if (!this.#banner.dataset.testid) this.#banner.dataset.testid = 'lock-banner';
    this.#banner.hidden = true;
    this.#banner.replaceChildren();
    this.#text = document.createElement('span');
    this.#text.className = 'lockhub-banner-text';
    this.#text.dataset.testid = 'lock-banner-text';
    this.#button = document.createElement('button');
    this.#button.type = 'button';
    this.#button.className = 'lockhub-takeover';
    this.#button.dataset.testid = 'lock-takeover';
    this.#button.textContent = 'Take over';
    this.#button.hidden = true;
    this.#button.addEventListener('click', () => void this.takeover());
    this.#banner.append(this.#text, this.#button);
    this.#hold = client._hold(type, uid, () => this.#render());
    this.#unsubWelcome = client.onWelcome(() => this.#render());
    this.#render();
  }

  /** The form's state. @returns {FormState} */
  get state() {
    return this.#state;
  }

  /** The lock as last known: mine when held, the other holder's when locked. @returns {Lock|null} */
  get lock() {
    return this.#hold.entry.lock;
  }

  /** Whether the user may edit now (held, or unknown: fail open). */
  get editable() {
    return this.#state === 'held' || this.#state === 'unknown' || this.#state === 'claiming';
  }

  /**
   * Takes the lock over (needs the takeover role). Resolves with the hub's answer.
   * @returns {Promise<Result|undefined>}
   */
  async takeover() {
    if (this.#closed || this.#busy) return undefined;
    this.#busy = true;
    this.#button.disabled = true;
    try {
      return await this.#hold.takeover();
    } catch (err) {
      console.warn('lockhub: takeover failed', err);
      return undefined;
    } finally {
      this.#busy = false;
      this.#button.disabled = false;
      this.#render();
    }
  }

  /**
   * Runs a write that releases the lock when it succeeds (approve and reject do,
   * PROTOCOL.md §5), so the form does not claim the lock back when the hub's Released
   * arrives. `ok` decides whether the write succeeded (default: a Response with
   * `ok`, or any truthy value). After success the form is closed without sending a
   * release; after a failure it keeps or claims its lock again.
   * @template T
   * @param {() => Promise<T>} write
   * @param {(v: T) => boolean} [ok]
   * @returns {Promise<T>}
   */
  async commit(write, ok) {
    const isOK = ok || ((v) => (v && typeof v === 'object' && 'ok' in v ? !!v.ok : !!v));
    const v = await this.#hold.commit(write, isOK);
    if (isOK(v)) this.#close(false);
    return v;
  }

  /** Releases the lock and restores the form. Safe to call twice. */
  close() {
    this.#close(true);
  }

  /** @param {boolean} release */
  #close(release) {
    if (this.#closed) return;
    this.#closed = true;
    this.#hold.drop(release);
    this.#unsubWelcome();
    this.#setReadOnly(false);
    this.#body.inert = false;
    this.#body.removeAttribute('aria-busy');
    if (this.#ownBanner) this.#banner.remove();
    else {
      this.#banner.hidden = true;
      this.#banner.replaceChildren();
    }
    this.#state = 'closed';
    this.#el.dataset.lockState = 'closed';
    if (this.#opts.onChange) safeCall(this.#opts.onChange, this);
  }

  #render() {
    if (this.#closed) return;
    const e = this.#hold.entry;
    const prev = this.#state;
    /** @type {FormState} */
    const state = e.status;
    this.#state = state;
    this.#el.dataset.lockState = state;
    const focusInside = this.#body.contains(document.activeElement);

    const blocked = state === 'locked';
    this.#body.inert = blocked;
    this.#setReadOnly(state === 'takenOver');
    if (state === 'claiming') this.#body.setAttribute('aria-busy', 'true');
    else this.#body.removeAttribute('aria-busy');

    let text = '';
    let kind = '';
    if (state === 'locked' && e.lock) {
      text = lockedByText(e.lock);
      if (e.note === 'forbidden') text += '. You are not allowed to take it over.';
      kind = 'locked';
    } else if (state === 'locked') {
      text = 'Someone else is editing this.';
      kind = 'locked';
    } else if (state === 'takenOver') {
      const who = e.takenBy ? e.takenBy.name : 'Someone';
      text = `${who} took over this record at ${formatClock(e.takenAt)}. The form is read-only; your unsaved changes were not saved.`;
      kind = 'takenOver';
    } else if (state === 'unknown') {
      text = e.note && e.note !== 'forbidden'
        ? `Editing without a lock (${e.note}).`
        : 'Edit locks are unavailable right now; you can edit, but others are not kept out.';
      kind = 'quiet';
    }
    this.#banner.dataset.kind = kind;
    this.#banner.setAttribute('role', kind === 'takenOver' ? 'alert' : 'status');
    if (this.#text.textContent !== text) this.#text.textContent = text;
    this.#banner.hidden = text === '';
    const offer = this.#opts.takeover ?? this.#client.canTakeOver;
    this.#button.hidden = !(blocked && offer && e.lock);

    if (prev !== state) {
      if (blocked && focusInside) this.#banner.focus();
      if (state === 'takenOver' && (focusInside || document.activeElement === document.body)) this.#banner.focus();
      if (state === 'held' && (prev === 'locked' || prev === 'takenOver')) {
        const a = document.activeElement;
        if (!a || a === document.body || a === this.#banner || this.#banner.contains(a)) focusFirst(this.#body);
      }
      if (this.#opts.onChange) safeCall(this.#opts.onChange, this);
    }
  }

  /** @param {boolean} on */
  #setReadOnly(on) {
    if (!on) {
      for (const undo of this.#restore.splice(0)) undo();
      delete this.#body.dataset.readonly;
      return;
    }
    if (this.#restore.length) return;
    this.#body.dataset.readonly = 'true';
    for (const el of this.#body.querySelectorAll('input, textarea, select, button')) {
      if (el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement) {
        if (el instanceof HTMLInputElement && /^(checkbox|radio|file|button|submit|reset|range|color)$/.test(el.type)) {
          const was = el.disabled;
          el.disabled = true;
          this.#restore.push(() => (el.disabled = was));
        } else {
          const was = el.readOnly;
          el.readOnly = true;
          this.#restore.push(() => (el.readOnly = was));
        }
      } else if (el instanceof HTMLSelectElement || el instanceof HTMLButtonElement) {
        const was = el.disabled;
        el.disabled = true;
        this.#restore.push(() => (el.disabled = was));
      }
    }
  }
}

/** @param {HTMLElement} root */
function focusFirst(root) {
  const el = /** @type {HTMLElement|null} */ (
    root.querySelector('input:not([type=hidden]):not([disabled]), textarea:not([disabled]), select:not([disabled]), button:not([disabled]), [tabindex]:not([tabindex="-1"])')
  );
  if (el) el.focus();
}

// ---------------------------------------------------------------------------------
// The grid.

/**
 * @typedef {object} LockGridOptions
 * @property {string} [header]  the column header. Default "Locked by".
 * @property {(locks: Map<string, Lock>, change: Change) => void} [onChange]  after each change of the type
 */

/**
 * Shows the locks of a type in a table: a "Locked by" column with the holder's name
 * and a live expiry, rows held by someone else dimmed (`lockhub-locked`), rows held
 * by me marked (`lockhub-mine`). Rows added later (a reload of the table) are
 * decorated too. Each row carries `data-lock-state` (`free`, `mine`, `other`) and
 * `data-lock-holder`.
 */
export class LockGrid {
  /** @type {LockClient} */ #client;
  /** @type {HTMLTableElement} */ #table;
  /** @type {(row: HTMLTableRowElement) => string|null|undefined} */ #uidOf;
  /** @type {Watch} */ #watch;
  /** @type {MutationObserver} */ #observer;
  /** @type {ReturnType<typeof setInterval>} */ #timer;
  #header;
  #closed = false;

  /**
   * @param {LockClient} client
   * @param {HTMLTableElement} table
   * @param {string} type
   * @param {string|((row: HTMLTableRowElement) => string|null|undefined)} rowUid
   * @param {LockGridOptions} opts
   */
  constructor(client, table, type, rowUid, opts) {
    this.#client = client;
    this.#table = table;
    this.type = type;
    this.#header = opts.header || 'Locked by';
    this.#uidOf = typeof rowUid === 'function' ? rowUid : (row) => row.getAttribute(rowUid);
    const onChange = opts.onChange;
    this.#watch = client.watch(type, (locks, change) => {
      this.render();
      if (onChange) safeCall(onChange, locks, change);
    });
    this.#observer = new MutationObserver((records) => {
      if (records.some((r) => [...r.addedNodes].some((n) => n.nodeName === 'TR' || n.nodeName === 'TBODY' || n.nodeName === 'THEAD'))) this.render();
    });
    this.#observer.observe(table, { childList: true, subtree: true });
    this.#timer = setInterval(() => this.#tickExpiry(), 1000);
    this.#unsubWelcome = client.onWelcome(() => this.render());
    // While the connection is down the column may be stale: say so (the snapshot after
    // the reconnect makes it whole again).
    this.#unsubState = client.onStateChange((s) => table.toggleAttribute('data-lockhub-offline', s.state !== 'open'));
    this.render();
  }

  /** @type {() => void} */ #unsubWelcome;
  /** @type {() => void} */ #unsubState;

  /** The live locks of the type, by uid. @returns {Map<string, Lock>} */
  get locks() {
    return this.#watch.locks;
  }

  /** Redraws the column; called on its own after every change. */
  render() {
    if (this.#closed) return;
    const headRow = this.#table.tHead && this.#table.tHead.rows[this.#table.tHead.rows.length - 1];
    if (headRow && !headRow.querySelector('th[data-lockhub-col]')) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.dataset.lockhubCol = '';
      th.dataset.testid = 'col-locked-by';
      th.className = 'lockhub-col';
      th.textContent = this.#header;
      headRow.append(th);
    }
    const me = this.#client.me?.oid;
    for (const body of this.#table.tBodies) {
      for (const row of body.rows) {
        if (row.dataset.lockhubSkip !== undefined) continue;
        const uid = this.#uidOf(row);
        let cell = /** @type {HTMLTableCellElement|null} */ (row.querySelector(':scope > td[data-lockhub-cell]'));
        if (!cell) {
          cell = document.createElement('td');
          cell.dataset.lockhubCell = '';
          cell.dataset.testid = 'locked-by';
          cell.className = 'lockhub-cell';
          row.append(cell);
        }
        const lock = uid ? this.#watch.locks.get(uid) : undefined;
        const state = !lock ? 'free' : lock.holderOid === me ? 'mine' : 'other';
        row.dataset.lockState = state;
        row.classList.toggle('lockhub-locked', state === 'other');
        row.classList.toggle('lockhub-mine', state === 'mine');
        if (!lock) {
          row.removeAttribute('data-lock-holder');
          row.removeAttribute('title');
          if (cell.childNodes.length) cell.replaceChildren();
          delete cell.dataset.expires;
          continue;
        }
        row.dataset.lockHolder = lock.holderName;
        row.title = state === 'mine'
          ? `You are editing this (until ${formatClock(lock.expiresAtUtc)})`
          : `${lockedByText(lock)}`;
        const name = document.createElement('span');
        name.className = 'lockhub-holder';
        name.textContent = lock.holderName;
        const parts = [name];
        if (state === 'mine') {
          const you = document.createElement('span');
          you.className = 'lockhub-you';
          you.textContent = 'you';
          parts.push(you);
        }
        const exp = document.createElement('span');
        exp.className = 'lockhub-expiry';
        parts.push(exp);
        cell.dataset.expires = lock.expiresAtUtc;
        cell.replaceChildren(...parts);
        this.#expiryText(cell, exp);
      }
    }
  }

  /** @param {HTMLElement} cell @param {HTMLElement} exp */
  #expiryText(cell, exp) {
    const at = parseTime(cell.dataset.expires || '');
    const left = at - this.#client.now();
    exp.textContent = `until ${formatClock(at)} · ${formatRemaining(left)}`;
    exp.setAttribute('aria-label', `until ${formatClock(at)}`);
  }

  #tickExpiry() {
    for (const cell of this.#table.querySelectorAll('td[data-lockhub-cell][data-expires]')) {
      const exp = cell.querySelector('.lockhub-expiry');
      if (exp instanceof HTMLElement && cell instanceof HTMLElement) this.#expiryText(cell, exp);
    }
  }

  /** Stops watching; leaves the column in place, emptied. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#watch.close();
    this.#observer.disconnect();
    clearInterval(this.#timer);
    this.#unsubWelcome();
    this.#unsubState();
    this.#table.removeAttribute('data-lockhub-offline');
  }
}

// ---------------------------------------------------------------------------------
// Default styles: small, overridable, injected once.

const STYLE_ID = 'lockhub-default-styles';

function injectStyles() {
  if (typeof document === 'undefined' || document.getElementById(STYLE_ID)) return;
  const s = document.createElement('style');
  s.id = STYLE_ID;
  s.textContent = `
:where(tr.lockhub-locked) > :where(td:not(.lockhub-cell), th) { opacity: .55; }
:where(tr.lockhub-locked) { background: #f4f5f7; }
:where(tr.lockhub-mine) > :where(td, th):first-child { box-shadow: inset 3px 0 0 #2563eb; }
:where(.lockhub-cell) { white-space: nowrap; }
:where(table[data-lockhub-offline]) :where(.lockhub-cell) { opacity: .55; }
:where(.lockhub-holder) { font-weight: 600; }
:where(.lockhub-you) { margin-left: .35em; padding: 0 .4em; border-radius: 999px; background: #dbeafe; color: #1e3a8a; font-size: .8em; }
:where(.lockhub-expiry) { display: block; font-size: .8em; color: #4b5563; font-variant-numeric: tabular-nums; }
:where(.lockhub-banner) { display: flex; gap: .75em; align-items: center; justify-content: space-between; padding: .6em .8em; border-radius: 6px; margin: 0 0 .75em; border: 1px solid #f59e0b; background: #fffbeb; color: #78350f; }
:where(.lockhub-banner[hidden]) { display: none; }
:where(.lockhub-banner[data-kind="takenOver"]) { border-color: #dc2626; background: #fef2f2; color: #7f1d1d; }
:where(.lockhub-banner[data-kind="quiet"]) { border-color: #d1d5db; background: #f9fafb; color: #4b5563; font-size: .9em; }
:where([inert]) { opacity: .6; }
`;
  document.head.append(s);
}
