// @ts-check
/**
 * The watched types of a client: for each, a live map of its locks by entityUid, made
 * from the hub's snapshot and kept by the lock events, with the callbacks of its
 * watchers. Internal to the client: {@link LockClient} owns one {@link Watches}, hands
 * out its {@link Watch} handles, and feeds it the welcome, the end of each socket,
 * unsolicited snapshots, lock events and the ticks of its timer; its {@link Holds}
 * reach it through `ref` and `unref`, so that the events of a held lock's type arrive.
 *
 * @module lockhub/watches
 */

import { safeCall } from './callback.js';
import { parseTime } from './format.js';
import { LockhubError } from './protocol.js';

/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Change} Change */
/** @typedef {import('./protocol.js').LockEvent} LockEvent */
/** @typedef {import('./connection.js').LockClient} LockClient */
/** @typedef {import('./holds.js').Holds} Holds */

/**
 * A watch of one type, made by {@link LockClient#watch}.
 * @typedef {object} Watch
 * @property {string} type
 * @property {Map<string, Lock>} locks  the live map, by entityUid
 * @property {(uid: string) => Lock|undefined} get
 * @property {() => Promise<void>} synced  resolves when a snapshot arrived on the current connection
 * @property {() => void} close
 */

/**
 * What the watches need of their client. Every member is read when it is needed, so the
 * client's state is never copied.
 * @typedef {object} WatchesHost
 * @property {(frame: Record<string, unknown>) => Promise<any>} request
 *   sends a request once the connection is up, and not again after a reconnect: it
 *   rejects with code `disconnected` when its socket closes first, `closed` once the
 *   client is closed
 * @property {() => boolean} sending  requests may be sent now: a socket is open and its auth
 *   went first (the hub answers them after its welcome)
 * @property {() => number} now        the client's estimate of the server's clock, Unix ms
 * @property {(type: string, locks: Map<string, Lock>) => void} onSnapshot
 *   a snapshot replaced the map of type (the holds learn from it)
 * @property {(err: unknown) => void} onError
 */

/**
 * The state of one watched type.
 * @typedef {object} TypeState
 * @property {string} type
 * @property {Map<string, Lock>} locks   live locks by entityUid
 * @property {Set<(locks: Map<string, Lock>, change: Change) => void>} subs
 * @property {number} refs       watchers plus holds of the type
 * @property {boolean} synced    a snapshot arrived on the current connection
 * @property {Array<() => void>} waiters  resolved by the next snapshot
 */

/**
 * The watched types of one client. Runs on the page's one thread, called only by its
 * {@link LockClient} and that client's {@link Holds}.
 */
export class Watches {
  /** @type {WatchesHost} */
  #host;
  /** @type {Map<string, TypeState>} */
  #types = new Map();
  /** Counts the sockets that closed: a snapshot is applied only on the socket its watch went out on. */
  #socket = 0;

  /** @param {WatchesHost} host */
  constructor(host) {
    this.#host = host;
  }

  // ------------------------------------------------------------------ for LockClient's public surface

  /**
   * See {@link LockClient#watch}.
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
        t.synced && this.#host.sending() ? Promise.resolve() : new Promise((r) => t.waiters.push(r)),
      close: () => {
        if (closed) return;
        closed = true;
        t.subs.delete(fn);
        this.unref(type);
      },
    };
  }

  /**
   * Watches type on behalf of a hold (without callbacks) until {@link Watches#unref}.
   * @param {string} type
   */
  ref(type) {
    this.#ref(type);
  }

  /**
   * Ends one watch or hold of type; the last one sends `unwatch` and forgets its map.
   * @param {string} type
   */
  unref(type) {
    const t = this.#types.get(type);
    if (!t) return;
    t.refs--;
    if (t.refs > 0) return;
    this.#types.delete(type);
    if (this.#host.sending()) void this.#host.request({ type: 'unwatch', entityType: type }).catch(() => {});
  }

  // ------------------------------------------------------------------ what the connection tells

  /** Once a socket has sent its auth: watches every type again; its snapshot makes the map whole. */
  connected() {
    for (const t of this.#types.values()) if (t.refs > 0) this.#sendWatch(t);
  }

  /** The socket closed: every map is stale until the next snapshot. */
  disconnected() {
    this.#socket++;
    for (const t of this.#types.values()) t.synced = false;
  }

  /**
   * A snapshot the hub sent without being asked (it lost Redis and got it back): it
   * replaces the map.
   * @param {string} type
   * @param {Lock[]} locks
   */
  snapshot(type, locks) {
    const t = this.#types.get(type);
    if (t) this.#apply(t, locks);
  }

  /** A lock event of PROTOCOL.md §3. @param {LockEvent} ev */
  event(ev) {
    const l = ev.lock;
    const t = this.#types.get(l.entityType);
    if (!t) return;
    const gone = ev.op === 'Released' || ev.op === 'Expired' || !(parseTime(l.expiresAtUtc) > this.#host.now());
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

  /**
   * Every tick of the client's timer: hides the locks whose lease ran out, even before
   * the hub's `Expired` arrives.
   * @param {number} now  the server's clock, ms
   */
  tick(now) {
    for (const t of this.#types.values()) {
      for (const [uid, l] of t.locks) {
        if (parseTime(l.expiresAtUtc) <= now) {
          t.locks.delete(uid);
          for (const fn of t.subs) safeCall(fn, t.locks, { op: 'Expired', lock: l, local: true });
        }
      }
    }
  }

  // ------------------------------------------------------------------ types

  /** @param {string} type @returns {TypeState} */
  #ref(type) {
    let t = this.#types.get(type);
    if (!t) {
      t = { type, locks: new Map(), subs: new Set(), refs: 0, synced: false, waiters: [] };
      this.#types.set(type, t);
    }
    t.refs++;
    if (t.refs === 1 && this.#host.sending()) this.#sendWatch(t);
    return t;
  }

  /** @param {TypeState} t */
  #sendWatch(t) {
    const socket = this.#socket;
    this.#host.request({ type: 'watch', entityType: t.type }).then(
      (snap) => {
        if (socket === this.#socket && this.#types.get(t.type) === t) this.#apply(t, snap.locks || []);
      },
      (err) => {
        if (err instanceof LockhubError && (err.code === 'disconnected' || err.code === 'closed')) return;
        this.#host.onError(err);
      },
    );
  }

  /** @param {TypeState} t @param {Lock[]} locks */
  #apply(t, locks) {
    const now = this.#host.now();
    t.locks = new Map();
    for (const l of locks) {
      if (l && parseTime(l.expiresAtUtc) > now) t.locks.set(l.entityUid, l);
    }
    t.synced = true;
    const waiters = t.waiters.splice(0);
    for (const r of waiters) r();
    for (const fn of t.subs) safeCall(fn, t.locks, { op: 'Snapshot' });
    this.#host.onSnapshot(t.type, t.locks);
  }
}
