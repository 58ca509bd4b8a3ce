// @ts-check
/**
 * The connection to the hub: {@link LockClient}, made by {@link connect}.
 *
 * It keeps one WebSocket to `/ws` (subprotocol `lockhub.v1`), authenticates with the
 * first frame, refreshes the token in band, gives up a socket on which the hub stopped
 * answering (a {@link Heartbeat} per socket), reconnects with backoff, and matches
 * answers to requests by id. The live map of each watched type it leaves to its
 * {@link Watches}, what it wants to hold to its {@link Holds}; it feeds both the
 * welcome, snapshots, lock events and the ticks of its timer; requests in flight to its
 * {@link Requests}.
 *
 * Headless: nothing here touches the DOM (the widgets are in `dom.js`, over the public
 * API only). The clock, the timers, the socket and `fetch` are injectable
 * ({@link ConnectOptions}), so the client runs under Node with a fake socket and a
 * fake clock. It listens to `pagehide`, `pageshow` and `online` when there is a
 * `window`.
 *
 * @module lockhub/connection
 */

import { fetchAudit } from './audit.js';
import { backoffDelay } from './backoff.js';
import { safeCall } from './callback.js';
import { systemClock } from './clock.js';
import { parseTime } from './format.js';
import { Heartbeat } from './heartbeat.js';
import { Holds } from './holds.js';
import { listenToPage } from './lifecycle.js';
import { Views } from './presence.js';
import { CloseCode, LockhubError, SUBPROTOCOL } from './protocol.js';
import { TokenRefresh } from './refresh.js';
import { Requests } from './requests.js';
import { Watches } from './watches.js';

/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Holder} Holder */
/** @typedef {import('./protocol.js').Welcome} Welcome */
/** @typedef {import('./protocol.js').Result} Result */
/** @typedef {import('./protocol.js').Change} Change */
/** @typedef {import('./protocol.js').LockEvent} LockEvent */
/** @typedef {import('./holds.js').Hold} Hold */
/** @typedef {import('./holds.js').HoldState} HoldState */
/** @typedef {import('./watches.js').Watch} Watch */
/** @typedef {import('./presence.js').View} View */
/** @typedef {import('./presence.js').ViewListener} ViewListener */
/** @typedef {import('./audit.js').AuditPage} AuditPage */
/** @typedef {import('./audit.js').AuditQuery} AuditQuery */
/** @typedef {import('./clock.js').Clock} Clock */
/** @typedef {import('./clock.js').TimerHandle} TimerHandle */

/**
 * The part of a WebSocket the client uses: a browser's `WebSocket`, or a test's fake.
 * @typedef {object} SocketLike
 * @property {number} readyState  1 when open (WebSocket.OPEN)
 * @property {(data: string) => void} send
 * @property {(code?: number, reason?: string) => void} close
 * @property {((ev: any) => void)|null} onopen
 * @property {((ev: {data: unknown}) => void)|null} onmessage
 * @property {((ev: {code: number, reason: string}) => void)|null} onclose
 * @property {((ev: any) => void)|null} onerror
 */

/** WebSocket.OPEN, which a fake socket and Node without WebSocket do not define. */
const OPEN = 1;

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
 * @property {number} [code]      the close code that ended the last socket (4000: the
 *   client gave it up, the hub did not answer in time)
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
 * @property {number} [goingAwaySpreadMs] after the hub closes with 1001 (going away), the
 *   first reconnect waits a uniform random delay in [0, goingAwaySpreadMs). Default 2000: every
 *   client of a stopping instance reconnects at once, and spread over 2 s a crowd of 10,000
 *   arrives at 5,000 sockets/s, about what one instance sets up (README, Benchmarks), while
 *   nobody waits longer than 2 s, far within the release grace. Later attempts back off as
 *   after any drop.
 * @property {number} [refreshBeforeMs] refresh the token this long before it expires. Default 30000.
 * @property {number} [requestTimeoutMs] an unanswered request fails after this. Default 15000.
 * @property {number} [unknownRetryMs] retry a claim answered `unknown` after this. Default 10000.
 * @property {number} [idlePingMs] send a `ping` when nothing has been heard from the hub for
 *   this long. Default 25000 (PROTOCOL.md §4, Heartbeat).
 * @property {number} [pongTimeoutMs] give a socket up (close 4000, then reconnect as after any
 *   drop) when no frame at all arrives this long after a `ping`, or after the first `auth`.
 *   Default 10000: a half-open connection is found within about 35 s.
 * @property {(err: unknown) => void} [onError] errors not tied to a request (logged by default)
 * @property {Clock} [clock] the clock and timers. Default: the page's (`Date.now`,
 *   `setTimeout`, ...); a test passes a fake one and drives time.
 * @property {(url: string, protocol: string) => SocketLike} [createSocket] makes the
 *   socket. Default: `new WebSocket(url, protocol)`.
 * @property {typeof fetch} [fetch] what {@link LockClient#audit} fetches with. Default:
 *   the global `fetch`.
 */

/**
 * Why the client asks for a token.
 * @typedef {object} TokenRequest
 * @property {'connect'|'refresh'} reason
 * @property {boolean} rejected  the hub refused the token given last (close 4401)
 */

/**
 * A connection to the hub. Create it with {@link connect}.
 */
export class LockClient {
  /** @type {Required<Omit<ConnectOptions, 'onState'>>} */
  #o;
  /** @type {Clock} */
  #clock;
  /** @type {SocketLike|null} */
  #ws = null;
  /** @type {Heartbeat|null} the liveness check of #ws */
  #heartbeat = null;
  #authed = false;
  // The socket is open and its auth went out: requests may follow the auth at once,
  // before the welcome (the hub answers them in order, after it), so a reconnect's
  // watches cost no round trip of their own.
  #sending = false;
  /** @type {string} the token the current socket authenticated with */
  #token = '';
  /** @type {Welcome|null} */
  #welcome = null;
  #skew = 0; // server clock minus client clock, ms
  /** @type {Requests} */
  #requests;
  /** @type {Watches} the watched types and their live maps */
  #watches;
  /** @type {Holds} the locks this client wants to hold */
  #holds;
  /** @type {Views} the entities this client views (PROTOCOL.md §9) */
  #views;
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
  /** @type {TimerHandle|undefined} */
  #reconnectTimer;
  /** @type {TokenRefresh} */
  #refresh;
  /** @type {() => void} stops listening to the page's lifecycle */
  #unlisten;
  /** @type {TimerHandle|undefined} */
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
    const clock = opts.clock || systemClock;
    this.#clock = clock;
    this.#o = {
      url: opts.url || defaultURL(),
      clock,
      createSocket: opts.createSocket || ((url, protocol) => /** @type {SocketLike} */ (/** @type {unknown} */ (new WebSocket(url, protocol)))),
      fetch: opts.fetch || ((input, init) => globalThis.fetch(input, init)),
      getToken: opts.getToken,
      backoffBaseMs: opts.backoffBaseMs ?? 500,
      backoffMaxMs: opts.backoffMaxMs ?? 10000,
      goingAwaySpreadMs: opts.goingAwaySpreadMs ?? 2000,
      refreshBeforeMs: opts.refreshBeforeMs ?? 30000,
      requestTimeoutMs: opts.requestTimeoutMs ?? 15000,
      unknownRetryMs: opts.unknownRetryMs ?? 10000,
      idlePingMs: opts.idlePingMs ?? 25000,
      pongTimeoutMs: opts.pongTimeoutMs ?? 10000,
      onError: opts.onError ?? ((err) => console.warn('lockhub:', err)),
    };
    this.#requests = new Requests({
      clock,
      timeoutMs: this.#o.requestTimeoutMs,
      sending: () => this.#sending,
      send: (frame) => {
        const ws = this.#ws;
        if (!ws || ws.readyState !== OPEN) return false;
        ws.send(JSON.stringify(frame));
        return true;
      },
    });
    this.#watches = new Watches({
      request: (frame) => this.#request(frame, false),
      sending: () => this.#sending,
      now: () => this.now(),
      onSnapshot: (type, locks) => this.#holds.snapshot(type, locks),
      onError: (err) => this.#o.onError(err),
    });
    this.#holds = new Holds({
      request: (frame) => this.#request(frame),
      ref: (type) => this.#watches.ref(type),
      unref: (type) => this.#watches.unref(type),
      closed: () => this.#closed,
      welcome: () => this.#welcome,
      now: () => this.now(),
      local: () => this.#clock.now(),
      standing: (type, uid) => this.#views.standing(type, uid),
      skew: () => this.#skew,
      onError: (err) => this.#o.onError(err),
      unknownRetryMs: this.#o.unknownRetryMs,
    });
    this.#views = new Views({
      request: (frame) => this.#request(frame, false),
      authed: () => this.#authed,
      me: () => this.#welcome?.holder?.oid,
      onError: (err) => this.#o.onError(err),
    });
    /** @type {Promise<Welcome>} */
    this.ready = new Promise((resolve) => {
      this.#resolveReady = resolve;
    });
    if (opts.onState) {
      this.#stateListeners.add(opts.onState);
      safeCall(opts.onState, this.state);
    }
    this.#refresh = new TokenRefresh({
      clock,
      beforeMs: this.#o.refreshBeforeMs,
      now: () => this.now(),
      getToken: () => this.#o.getToken({ reason: 'refresh', rejected: false }),
      request: (frame) => this.#request(frame, false),
      socket: () => this.#ws,
      live: () => this.#authed && !this.#closed,
      refreshed: (token) => {
        this.#token = token;
      },
      onError: (err) => this.#o.onError(err),
    });
    this.#unlisten = listenToPage({ hide: this.#onPageHide, show: this.#onPageShow, online: this.#onOnline });
    this.#ticker = clock.setInterval(() => this.#tick(), 500);
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
    return this.#clock.now() + this.#skew;
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
    return this.#holds.claim(type, uid);
  }

  /**
   * Takes a lock over (the welcome must say `canTakeOver`). The lock is then held.
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  takeover(type, uid) {
    return this.#holds.takeover(type, uid);
  }

  /**
   * Renews a lock now (held locks are renewed on their own).
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  renew(type, uid) {
    return this.#holds.renew(type, uid);
  }

  /**
   * Releases a lock and forgets it (no more renewals or re-claims).
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  release(type, uid) {
    return this.#holds.release(type, uid);
  }

  /**
   * Claims every entity of uids, all or none (PROTOCOL.md §12: 1 to 100 distinct uids
   * of one type). Resolves with the hub's result: `acquired` with the caller's `locks`
   * in the order asked (they are then held, as after {@link LockClient#claim}), or
   * `locked` with the `locks` others hold (nothing was claimed), or `unknown` (the
   * hub's Redis is down: fail open). Rejects with a {@link LockhubError}
   * (`bad_request`, `too_many_locks`, ...); a list that is not one throws a TypeError.
   * @param {string} type
   * @param {string[]} uids
   * @returns {Promise<Result>}
   */
  claimMany(type, uids) {
    return this.#holds.many('claimMany', type, uids);
  }

  /**
   * Releases every entity of uids the caller holds (PROTOCOL.md §12); resolves with
   * `released` and the `count` released.
   * @param {string} type
   * @param {string[]} uids
   * @returns {Promise<Result>}
   */
  releaseMany(type, uids) {
    return this.#holds.many('releaseMany', type, uids);
  }

  /**
   * Wants a lock until the handle's drop: claims it, claims it again when it becomes
   * free (or takes the hub's hand-off when this person waits in line, PROTOCOL.md §11),
   * renews it, and calls onChange with every change of its state. What a form holds
   * with; a page or a framework binding uses it for the same. Pair it with a
   * {@link LockClient#view} with intent `edit` to wait in line.
   * @param {string} type
   * @param {string} uid
   * @param {(s: HoldState) => void} [onChange]
   * @returns {Hold}
   */
  hold(type, uid, onChange = () => {}) {
    return this.#holds.hold(type, uid, onChange);
  }

  /**
   * Every live lock of the tenant (PROTOCOL.md §10, the admin role): the lock console's
   * data. Rejects with a {@link LockhubError} `forbidden` without the role.
   * @returns {Promise<Lock[]>}
   */
  async adminLocks() {
    const r = await this.#request({ type: 'adminLocks' }, false);
    return r.locks || [];
  }

  /**
   * Releases someone's lock as an administrator (PROTOCOL.md §10): `released` with the
   * lock, or `notHeld`. Watchers see `Released` with `by`.
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  forceRelease(type, uid) {
    return this.#request({ type: 'forceRelease', entityType: type, entityUid: uid }, false);
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
    return this.#holds.held();
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
    return this.#watches.watch(type, onChange);
  }

  /**
   * Views an entity (PROTOCOL.md §9) until the handle's close: the hub lists this
   * person among its viewers, and listener.onPresence gets every change of who views
   * it (everyone, this person included, ordered by `since`). Viewed again after every
   * reconnect. Several views of one entity in one client count once; the last close
   * sends `unview`. A {@link LockForm} views its entity on its own.
   * @param {string} type
   * @param {string} uid
   * @param {ViewListener} [listener]
   * @returns {View}
   */
  view(type, uid, listener = {}) {
    return this.#views.view(type, uid, listener, (t, u) => this.nudge(t, u));
  }

  /**
   * Asks the holder of an entity this client views to finish (PROTOCOL.md §9).
   * Resolves with the hub's result: outcome `nudged` (also when none of the holder's
   * tabs has it open: nothing reaches them then), `notHeld` (free, or mine) or
   * `unknown`; rejects with a {@link LockhubError}: code `rate_limited` (this person
   * asked within the last 30 s), `forbidden` (not viewing it), or a local failure. Not
   * sent again after a reconnect.
   * @param {string} type
   * @param {string} uid
   * @returns {Promise<Result>}
   */
  nudge(type, uid) {
    return this.#request({ type: 'nudge', entityType: type, entityUid: uid }, false);
  }

  /**
   * Sends a request frame and resolves with its answer (`result`, `snapshot` or `pong`, without
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
    this.#holds.dropAll();
    this.#views.dropAll();
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

  /**
   * Reads the tenant's audit trail (GET /api/admin/audit of the hub's origin, with the
   * token of the socket; the admin role), newest first. Rejects with a
   * {@link LockhubError} carrying the answer's code (`forbidden`, `bad_request`, ...).
   * @param {AuditQuery} [query]
   * @returns {Promise<AuditPage>}
   */
  async audit(query = {}) {
    const token = this.#token || (await this.#o.getToken({ reason: 'connect', rejected: false }));
    return fetchAudit(this.#o.url, token, query, this.#o.fetch);
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
      ws = this.#o.createSocket(this.#o.url, SUBPROTOCOL);
    } catch (err) {
      this.#o.onError(err);
      this.#scheduleReconnect(0, 'bad url');
      return;
    }
    this.#ws = ws;
    this.#authed = false;
    this.#sending = false;
    this.#token = token;
    const heartbeat = new Heartbeat({
      clock: this.#clock,
      idleMs: this.#o.idlePingMs,
      answerMs: this.#o.pongTimeoutMs,
      // An old hub answers a ping with bad_request: an answer all the same.
      ping: () => void this.#request({ type: 'ping' }, false).catch(() => {}),
      dead: () => {
        if (ws === this.#ws) this.#drop(CloseCode.NO_ANSWER, 'no answer from the hub');
      },
    });
    this.#heartbeat = heartbeat;
    ws.onopen = () => {
      if (ws !== this.#ws) return;
      ws.send(JSON.stringify({ type: 'auth', token }));
      heartbeat.expectAnswer();
      // The watches go with the auth: their snapshots come right after the welcome,
      // which the hub then sends with them in one write.
      this.#sending = true;
      this.#watches.connected();
    };
    ws.onmessage = (ev) => {
      if (ws !== this.#ws) return;
      heartbeat.heard();
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
   * @param {number} [spreadMs]  this attempt waits a uniform random delay in [0, spreadMs)
   *   instead of the backoff's
   */
  #scheduleReconnect(code, reason, now = false, spreadMs = 0) {
    if (this.#closed || this.#suspended || this.#reconnectTimer !== undefined) return;
    let delay = 0;
    if (!now) {
      delay = spreadMs > 0
        ? backoffDelay(0, spreadMs, spreadMs) // full jitter over the spread
        : backoffDelay(this.#attempt, this.#o.backoffBaseMs, this.#o.backoffMaxMs);
    }
    if (!now) this.#attempt++;
    this.#setState({ state: 'reconnecting', attempt: this.#attempt, retryInMs: delay, code, reason });
    this.#reconnectTimer = this.#clock.setTimeout(() => void this.#open(), delay);
  }

  /**
   * Gives the current socket up at once, as if it had closed with code: a hub that
   * does not answer may not answer a close frame either, and the browser would wait.
   * @param {number} code
   * @param {string} reason
   */
  #drop(code, reason) {
    const ws = this.#ws;
    if (!ws) return;
    this.#ws = null; // its close event, whenever it comes, is ignored
    try {
      ws.close(code, reason);
    } catch {
      /* already closing */
    }
    this.#onClose(code, reason);
  }

  /** @param {number} code @param {string} reason */
  #onClose(code, reason) {
    this.#ws = null;
    this.#heartbeat?.stop();
    this.#heartbeat = null;
    const wasAuthed = this.#authed;
    this.#authed = false;
    this.#sending = false;
    this.#refresh.stop();
    this.#watches.disconnected();
    this.#views.disconnected();
    this.#requests.disconnected();
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
    // A hub going away (1001) was healthy a moment ago: come back soon, but not all of
    // its clients at the same moment (the next hub would read a crowd of snapshots and
    // tokens at once): the first attempt is spread over goingAwaySpreadMs.
    if (code === CloseCode.GOING_AWAY && wasAuthed) {
      this.#attempt = 0;
      this.#scheduleReconnect(code, reason, now, this.#o.goingAwaySpreadMs);
      return;
    }
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
      case 'presence':
        // Applied here, in arrival order, before its answer resolves (PROTOCOL.md §9).
        if (typeof f.entityType === 'string' && typeof f.entityUid === 'string') this.#views.presence(f);
        if (f.id === undefined) return;
      // falls through: the answer to a view
      case 'result':
      case 'snapshot':
      case 'pong':
      case 'error': {
        if (f.type === 'snapshot' && f.id === undefined) {
          this.#watches.snapshot(f.entityType, f.locks || []);
          return;
        }
        if (!this.#requests.answer(f) && f.type === 'error') this.#o.onError(new LockhubError(f.code, f.message));
        return;
      }
      case 'lock':
        this.#onLockEvent(f);
        return;
      case 'handoff':
        // PROTOCOL.md §11: the hub gave this person the lock through this socket.
        if (f.lock && typeof f.lock.entityUid === 'string') this.#holds.handoff(f.lock);
        return;
      case 'nudge':
        if (typeof f.entityType === 'string' && typeof f.entityUid === 'string') this.#views.nudge(f);
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
    this.#skew = Number.isFinite(st) ? st - this.#clock.now() : 0;
    this.#authed = true;
    this.#tokenForced = false; // the token was good
    this.#attempt = 0;
    this.#everOpened = true;
    this.#setState({ state: 'open', attempt: 0 });
    this.#refresh.schedule(this.#token);
    this.#heartbeat?.pingWhenIdle();
    // The watches went with the auth (their snapshots make the maps whole); re-claim
    // what is wanted, then send what waited for the connection.
    this.#holds.reclaim();
    this.#views.connected();
    this.#requests.flush();
    this.#resolveReady(w);
    for (const fn of this.#welcomeListeners) safeCall(fn, w);
    this.#holds.notifyAll();
  }

  /** @param {string} why */
  #shutdown(why) {
    this.#heartbeat?.stop();
    this.#clock.clearTimeout(this.#reconnectTimer);
    this.#refresh.stop();
    this.#clock.clearInterval(this.#ticker);
    this.#reconnectTimer = undefined;
    this.#requests.failAll(why);
    this.#unlisten();
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
    this.#holds.pageHide((type, uid) => {
      if (ws && this.#authed && ws.readyState === OPEN) {
        ws.send(JSON.stringify({ id: this.#requests.nextId(), type: 'release', entityType: type, entityUid: uid }));
      }
    });
    if (ev && ev.persisted) {
      this.#suspended = true;
      this.#heartbeat?.stop();
      this.#clock.clearTimeout(this.#reconnectTimer);
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
    this.#clock.clearTimeout(this.#reconnectTimer);
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
    return this.#requests.add(frame, resend);
  }

  // ------------------------------------------------------------------ events and ticks

  /** @param {LockEvent} ev */
  #onLockEvent(ev) {
    const l = ev.lock;
    if (!l || typeof l.entityUid !== 'string') return;
    this.#watches.event(ev);
    this.#holds.event(ev);
  }

  #tick() {
    const now = this.now();
    this.#watches.tick(now);
    if (!this.#authed) return;
    this.#holds.tick(now, this.#clock.now());
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
  if (typeof window === 'undefined' || !window.location) {
    throw new TypeError('lockhub: connect needs a url outside a browser page (e.g. wss://locks.example.com/ws)');
  }
  const l = window.location;
  return `${l.protocol === 'https:' ? 'wss:' : 'ws:'}//${l.host}/ws`;
}
