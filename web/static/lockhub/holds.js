// @ts-check
/**
 * The locks a client wants to hold, and the state machine of each: claim, renew,
 * claim again when it becomes free or after a reconnect, lose it to someone else.
 * Internal to the client: {@link LockClient} owns one {@link Holds} and feeds it the
 * welcome, snapshots, lock events, `handoff` frames and the ticks of its timer; a page
 * (and {@link LockForm}) reaches it through the public {@link LockClient#hold}, whose
 * handle ({@link Hold}) shows a {@link HoldState}, never an {@link Entry}.
 *
 * @module lockhub/holds
 */

import { safeCall } from './callback.js';
import { cleanName, holderNameOf, parseTime } from './format.js';
import { LockhubError } from './protocol.js';

/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Holder} Holder */
/** @typedef {import('./protocol.js').Welcome} Welcome */
/** @typedef {import('./protocol.js').Result} Result */
/** @typedef {import('./protocol.js').LockEvent} LockEvent */
/** @typedef {import('./connection.js').LockClient} LockClient */
/** @typedef {import('./form.js').LockForm} LockForm */

/**
 * What a hold is, as its handle shows it: see {@link Entry} for `status`. `releasing`:
 * the hub answered the release `pending` (PROTOCOL.md §4: the holder's other socket is
 * on another instance, which may be dead and not yet known to be); the status becomes
 * `released` when the hub's `Released` (or `Expired`) says the lock went, or, with
 * note `elsewhere`, when the lock shows it lives on with this person's other tab: a
 * `Renewed` of it, or no end within {@link RELEASING_MAX_MS} (the contract's bound is the
 * release grace + 30 s).
 * @typedef {object} HoldState
 * @property {string} type
 * @property {string} uid
 * @property {HoldStatus} status
 * @property {Lock|null} lock      mine when held, the other holder's when locked
 * @property {Holder|null} takenBy who took it over (`takenOver`) or released it (`ended`)
 * @property {string} takenAt      RFC 3339, with takenBy
 * @property {string} note         the last notable answer, e.g. `forbidden`
 */

/**
 * `free`: nobody holds it, and this page does not claim it because this person only
 * looks (they stopped waiting, PROTOCOL.md §11); {@link Hold}'s claim takes it.
 * @typedef {'claiming'|'held'|'locked'|'free'|'takenOver'|'ended'|'unknown'|'releasing'|'released'} HoldStatus
 */

/**
 * The state of one entity this client wants to hold.
 *
 * status: `claiming` (no answer yet), `held` (mine), `locked` (someone else's; claimed
 * again when they release or their lease runs out), `takenOver` (taken from me; not
 * claimed again), `ended` (mine, released by someone other than this page: another app
 * such as the .NET approve, another tab through HTTP, an administrator; not claimed
 * again), `unknown` (the store is down: fail open, retried), `released` (the hub
 * released it for me after a write, see {@link LockForm#commit}).
 * @typedef {object} Entry
 * @property {string} key
 * @property {string} type
 * @property {string} uid
 * @property {boolean} want
 * @property {boolean} auto        claim on its own when the entity becomes free
 * @property {HoldStatus} status
 * @property {Lock|null} lock
 * @property {Holder|null} takenBy  who took it over (`takenOver`) or released it (`ended`, when the event says)
 * @property {string} takenAt
 * @property {string} note         the last notable answer, e.g. `forbidden`
 * @property {Promise<Result>|null} claiming
 * @property {boolean} renewing
 * @property {number} nextRenewAt   client clock, ms
 * @property {number} retryAt       client clock, ms
 * @property {boolean} committing
 * @property {number} releasingUntil  client clock, ms: a pending release's end at the latest
 * @property {Set<(e: Entry) => void>} listeners
 */

/**
 * A hold of one entity, made by {@link LockClient#hold}: the client claims the lock,
 * claims it again when it becomes free (unless someone is ahead in the waiting line,
 * PROTOCOL.md §11: then the hub hands it over), renews it, and calls the listener with
 * every change of its {@link HoldState}.
 * @typedef {object} Hold
 * @property {HoldState} state  the current state (a fresh copy at each read)
 * @property {() => Promise<Result>} takeover  takes the lock over (the takeover role)
 * @property {() => void} claim  claims it now when it is `free` or `locked` (after this
 *   person chose to wait again, say); the hub answers `locked` if someone has it
 * @property {<T>(write: () => Promise<T>, ok: (v: T) => boolean) => Promise<T>} commit
 *   runs a write that releases the lock when ok says it succeeded (approve, reject), so
 *   that the Released that follows is not taken for someone else's release
 * @property {() => Promise<Result>} release  releases the lock and keeps the hold, which
 *   says `releasing` while the hub's answer is `pending`, then `released`; it does not
 *   claim again
 * @property {(release?: boolean) => void} drop  ends the hold; releases the lock unless
 *   release is false (the last hold of an entity)
 */

/**
 * The public state of an entry.
 * @param {Entry} e
 * @returns {HoldState}
 */
function stateOf(e) {
  return { type: e.type, uid: e.uid, status: e.status, lock: e.lock, takenBy: e.takenBy, takenAt: e.takenAt, note: e.note };
}

/**
 * What the holds need of their client. Every member is read when it is needed, so the
 * client's state is never copied.
 * @typedef {object} HoldsHost
 * @property {(frame: Record<string, unknown>) => Promise<any>} request
 *   sends a request that is sent again after a reconnect; rejects once the client is closed
 * @property {(type: string) => void} ref    watches the type, so that its events reach the holds
 * @property {(type: string) => void} unref
 * @property {() => boolean} closed          the client was closed (or forbidden)
 * @property {() => Welcome|null} welcome    the last welcome
 * @property {() => number} now              the client's estimate of the server's clock, Unix ms
 * @property {() => number} local            the client's own clock, Unix ms
 * @property {(type: string, uid: string) => 'waiting'|'looking'|null} standing
 *   where this person stands on the entity as the hub last said (PROTOCOL.md §9, §11):
 *   `waiting` in line (the hub hands the lock over, so the hold does not claim when it
 *   is freed), `looking` (they stopped waiting: the hold does not claim either), null
 *   when the hub does not say (older than version 3: claim when freed, as before)
 * @property {() => number} skew             the server's clock minus the client's, ms
 * @property {(err: unknown) => void} onError
 * @property {number} unknownRetryMs         retry a claim answered `unknown` after this
 */

/**
 * How long a pending release may say `releasing` before the hold takes the lock to live
 * on with another tab of this person: the contract's bound (release grace, 10 s by
 * default, + 30 s) and a margin.
 */
export const RELEASING_MAX_MS = 45000;

/** @param {string} type @param {string} uid */
function keyOf(type, uid) {
  return `${type}\u0000${uid}`;
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
 * The entries of one client, by type and uid. Runs on the page's one thread, called
 * only by its {@link LockClient}.
 */
export class Holds {
  /** @type {HoldsHost} */
  #host;
  /** @type {Map<string, Entry>} */
  #entries = new Map();

  /** @param {HoldsHost} host */
  constructor(host) {
    this.#host = host;
  }

  /** The oid of the welcome, if any. */
  #me() {
    return this.#host.welcome()?.holder?.oid;
  }

  // ------------------------------------------------------------------ for LockClient's public surface

  /** See {@link LockClient#claim}. @param {string} type @param {string} uid @returns {Promise<Result>} */
  claim(type, uid) {
    const e = this.#entry(type, uid, false);
    e.want = true;
    return this.#claimEntry(e, 'claim');
  }

  /** See {@link LockClient#takeover}. @param {string} type @param {string} uid @returns {Promise<Result>} */
  takeover(type, uid) {
    const e = this.#entry(type, uid, false);
    e.want = true;
    return this.#claimEntry(e, 'takeover');
  }

  /** See {@link LockClient#renew}. @param {string} type @param {string} uid @returns {Promise<Result>} */
  renew(type, uid) {
    const e = this.#entries.get(keyOf(type, uid));
    if (e && e.want) return this.#renewEntry(e);
    return this.#host.request({ type: 'renew', entityType: type, entityUid: uid });
  }

  /** See {@link LockClient#release}. @param {string} type @param {string} uid @returns {Promise<Result>} */
  release(type, uid) {
    const e = this.#entries.get(keyOf(type, uid));
    if (e) this.#dropEntry(e, false);
    return this.#host.request({ type: 'release', entityType: type, entityUid: uid });
  }

  /** The locks held now (status `held`). @returns {Lock[]} */
  held() {
    /** @type {Lock[]} */
    const out = [];
    for (const e of this.#entries.values()) if (e.status === 'held' && e.lock) out.push(e.lock);
    return out;
  }

  /**
   * Wants a lock until the returned drop is called: claims it, claims it again
   * when it becomes free (auto), and reports every change of its state to fn.
   * @param {string} type
   * @param {string} uid
   * @param {(s: HoldState) => void} fn
   * @returns {Hold}
   */
  hold(type, uid, fn) {
    const e = this.#entry(type, uid, true);
    e.auto = true;
    e.want = true;
    e.listeners.add(fn);
    if (e.status === 'takenOver' || e.status === 'ended' || e.status === 'released' || e.status === 'releasing') {
      e.status = 'claiming';
      e.takenBy = null;
    }
    if (e.status !== 'held') void this.#claimEntry(e, 'claim').catch(() => {});
    return {
      get state() {
        return stateOf(e);
      },
      takeover: () => {
        e.want = true;
        e.note = '';
        return this.#claimEntry(e, 'takeover');
      },
      claim: () => {
        if (this.#entries.get(e.key) !== e || (e.status !== 'free' && e.status !== 'locked')) return;
        e.want = true;
        void this.#claimEntry(e, 'claim').catch(() => {});
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
      release: async () => {
        e.want = false;
        const held = e.status === 'held' || e.claiming !== null;
        if (!held) return { outcome: 'notHeld' };
        e.status = 'releasing';
        this.#notify(e);
        const r = await this.#host.request({ type: 'release', entityType: e.type, entityUid: e.uid });
        // PROTOCOL.md §4: pending means the lock goes when the hub notices the death of
        // the instance of this person's other socket; the event says when.
        if (e.status === 'releasing' && !(r.outcome === 'released' && r.pending)) {
          e.status = 'released';
          e.lock = null;
          this.#notify(e);
        } else if (e.status === 'releasing') {
          e.releasingUntil = this.#host.local() + RELEASING_MAX_MS;
        }
        return r;
      },
      drop: (release = true) => {
        e.listeners.delete(fn);
        if (e.listeners.size === 0) this.#dropEntry(e, release);
      },
    };
  }

  /** Forgets every entry, releasing what is held (the client closes). */
  dropAll() {
    for (const e of [...this.#entries.values()]) this.#dropEntry(e, true);
  }

  // ------------------------------------------------------------------ what the connection tells

  /** After a welcome: claims again what is wanted. */
  reclaim() {
    for (const e of this.#entries.values()) {
      if (e.want && !e.claiming && e.status !== 'takenOver') {
        void this.#claimEntry(e, 'claim').catch(() => {});
      }
    }
  }

  /** Tells every entry's listeners its state (after a welcome: canTakeOver may have changed). */
  notifyAll() {
    for (const e of this.#entries.values()) this.#notify(e);
  }

  /**
   * A snapshot of type replaced the map: a lock that blocked us may be gone, and ours
   * may be someone else's or missing.
   * @param {string} type
   * @param {Map<string, Lock>} locks  the live locks of the type, by uid
   */
  snapshot(type, locks) {
    const me = this.#me();
    for (const e of this.#entries.values()) {
      if (e.type !== type || !e.want) continue;
      const l = locks.get(e.uid);
      if (e.status === 'locked' && !l && e.auto) this.#freed(e);
      else if (e.status === 'locked' && l && l.holderOid !== me) {
        e.lock = l;
        this.#notify(e);
      } else if (e.status === 'held' && l && l.holderOid !== me && newerThan(l, e.lock)) {
        this.#lostTo(e, l);
      } else if (e.status === 'held' && !l && !e.claiming) {
        // Ours is gone (Redis came back empty): claim it again before anyone else.
        void this.#claimEntry(e, 'claim').catch(() => {});
      }
    }
  }

  /**
   * A `handoff` frame (PROTOCOL.md §11): the hub gave this person the lock, through
   * this socket, as if it had claimed it. The entry holds it now, without a claim.
   * @param {Lock} lock
   */
  handoff(lock) {
    const e = this.#entries.get(keyOf(lock.entityType, lock.entityUid));
    if (!e || !e.want || lock.holderOid !== this.#me()) return;
    if (e.status === 'held') return;
    e.status = 'held';
    e.lock = lock;
    e.takenBy = null;
    e.note = '';
    e.nextRenewAt = this.#host.local() + this.#renewMs();
    this.#notify(e);
  }

  /**
   * Claims (or releases) many entities of one type at once (PROTOCOL.md §12). Claimed
   * ones are held afterwards like a claim's: renewed and claimed again after a
   * reconnect, until released.
   * @param {'claimMany'|'releaseMany'} op
   * @param {string} type
   * @param {string[]} uids
   * @returns {Promise<Result>}
   */
  async many(op, type, uids) {
    if (!Array.isArray(uids) || uids.length === 0 || uids.some((u) => typeof u !== 'string' || u === '')) {
      throw new TypeError(`lockhub: ${op} needs a non-empty list of uids`);
    }
    if (op === 'releaseMany') {
      for (const uid of uids) {
        const e = this.#entries.get(keyOf(type, uid));
        if (e) this.#dropEntry(e, false);
      }
      return this.#host.request({ type: op, entityType: type, entityUids: uids });
    }
    const r = await this.#host.request({ type: op, entityType: type, entityUids: uids });
    if (r.outcome === 'acquired' && Array.isArray(r.locks)) {
      for (const l of r.locks) {
        if (!l || typeof l.entityUid !== 'string') continue;
        const e = this.#entry(type, l.entityUid, false);
        e.want = true;
        e.status = 'held';
        e.lock = l;
        e.nextRenewAt = this.#host.local() + this.#renewMs();
        this.#notify(e);
      }
    }
    return r;
  }

  /** A lock event of PROTOCOL.md §3. @param {LockEvent} ev */
  event(ev) {
    const e = this.#entries.get(keyOf(ev.lock.entityType, ev.lock.entityUid));
    if (e) this.#entryEvent(e, ev);
  }

  /**
   * Every tick of the client's timer while authenticated: renews what is due, and
   * claims again what may be free.
   * @param {number} now    the server's clock, ms
   * @param {number} local  the client's clock, ms
   */
  tick(now, local) {
    for (const e of this.#entries.values()) {
      if (e.status === 'releasing' && e.releasingUntil && local >= e.releasingUntil) this.#releasedHere(e);
      if (!e.want) continue;
      if (e.status === 'held') {
        if (!e.renewing && local >= e.nextRenewAt) void this.#renewEntry(e).catch(() => {});
      } else if (e.status === 'locked') {
        // The holder's lease ran out and no event said so (yet): try.
        if (e.auto && !e.claiming && e.lock && parseTime(e.lock.expiresAtUtc) <= now) this.#freed(e);
      } else if (e.status === 'unknown' || (e.status === 'claiming' && e.retryAt)) {
        if (!e.claiming && e.retryAt && local >= e.retryAt) {
          e.retryAt = 0;
          void this.#claimEntry(e, 'claim').catch(() => {});
        }
      }
    }
  }

  /**
   * The page is going away: calls release for each held lock, and marks it to be
   * claimed again if the page comes back.
   * @param {(type: string, uid: string) => void} release
   */
  pageHide(release) {
    for (const e of this.#entries.values()) {
      if (e.status !== 'held') continue;
      release(e.type, e.uid);
      e.status = 'claiming'; // claimed again if the page comes back
    }
  }

  // ------------------------------------------------------------------ entries

  /** @param {string} type @param {string} uid @param {boolean} auto */
  #entry(type, uid, auto) {
    const key = keyOf(type, uid);
    let e = this.#entries.get(key);
    if (!e) {
      e = {
        key, type, uid, want: false, auto, status: 'claiming', lock: null, takenBy: null, takenAt: '',
        note: '', claiming: null, renewing: false, nextRenewAt: 0, retryAt: 0, committing: false, releasingUntil: 0,
        listeners: new Set(),
      };
      this.#entries.set(key, e);
      this.#host.ref(type); // holds need the type's events (Released, TakenOver, ...)
    }
    return e;
  }

  /**
   * The entry held its lock and someone other than this page released it (an
   * administrator, another program): read-only, not claimed back.
   * @param {Entry} e @param {LockEvent} ev
   */
  #endedBy(e, ev) {
    e.status = 'ended';
    e.want = false;
    e.lock = null;
    // The name as every shown name is (PROTOCOL.md §6): another program may publish
    // on the feed (§8), with a name no lockhub cleaned.
    e.takenBy = ev.by ? { oid: ev.by.oid, name: cleanName(ev.by.name, ev.by.oid) } : null;
    e.takenAt = ev.at || new Date(this.#host.now()).toISOString();
    this.#notify(e);
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
    e.takenBy = { oid: l.holderOid, name: holderNameOf(l) };
    e.takenAt = at || new Date(this.#host.now()).toISOString();
    this.#notify(e);
  }

  /** @param {Entry} e @param {boolean} release */
  #dropEntry(e, release) {
    if (this.#entries.get(e.key) !== e) return;
    this.#entries.delete(e.key);
    const held = e.status === 'held' || e.claiming !== null;
    e.want = false;
    e.listeners.clear();
    if (release && held && !this.#host.closed()) {
      void this.#host.request({ type: 'release', entityType: e.type, entityUid: e.uid }).catch(() => {});
    }
    this.#host.unref(e.type);
  }

  /**
   * @param {Entry} e
   * @param {'claim'|'takeover'} op
   * @returns {Promise<Result>}
   */
  #claimEntry(e, op) {
    if (e.claiming && op === 'claim') return e.claiming;
    const p = this.#host.request({ type: op, entityType: e.type, entityUid: e.uid }).then(
      (r) => {
        if (e.claiming === p) e.claiming = null;
        this.#applyClaim(e, r, op);
        return r;
      },
      (err) => {
        if (e.claiming === p) e.claiming = null;
        if (err instanceof LockhubError && err.code === 'timeout' && e.want) {
          e.retryAt = this.#host.local() + 1000;
        } else if (e.want && e.auto && this.#entries.get(e.key) === e) {
          // bad_request, not_lockable, invalid_entity: a page bug. Say so loudly, leave
          // the form editable (the API edge still guards writes), and stop.
          this.#host.onError(err);
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
      if (got && current && !this.#host.closed()) {
        void this.#host.request({ type: 'release', entityType: e.type, entityUid: e.uid }).catch(() => {});
      }
      return;
    }
    e.note = '';
    if (got) {
      e.status = 'held';
      e.lock = r.lock || null;
      e.takenBy = null;
      e.nextRenewAt = this.#host.local() + this.#renewMs();
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
      e.retryAt = this.#host.local() + Math.min(this.#host.unknownRetryMs, this.#renewMs());
    } else {
      this.#host.onError(new Error(`lockhub: unexpected ${op} outcome ${r.outcome}`));
      return;
    }
    this.#notify(e);
  }

  /** @param {Entry} e @returns {Promise<Result>} */
  #renewEntry(e) {
    e.renewing = true;
    e.nextRenewAt = this.#host.local() + this.#renewMs();
    return this.#host.request({ type: 'renew', entityType: e.type, entityUid: e.uid }).then(
      (r) => {
        e.renewing = false;
        if (this.#entries.get(e.key) !== e || !e.want || e.status !== 'held') return r;
        if (r.outcome === 'renewed') {
          e.lock = r.lock || e.lock;
          this.#notify(e);
        } else if (r.outcome === 'lost') {
          const l = r.lock || null;
          if (l && l.holderOid !== this.#me()) {
            this.#lostTo(e, l);
          } else {
            e.status = 'claiming';
            void this.#claimEntry(e, 'claim').catch(() => {});
          }
        } else if (r.outcome === 'unknown') {
          // The store is down; the lease may still run. Try again soon.
          e.nextRenewAt = this.#host.local() + Math.min(this.#host.unknownRetryMs, this.#renewMs());
        }
        return r;
      },
      (err) => {
        e.renewing = false;
        e.nextRenewAt = this.#host.local() + 1000;
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
   * @param {LockEvent} ev
   */
  #entryEvent(e, ev) {
    const me = this.#me();
    const mine = ev.lock.holderOid === me;
    switch (ev.op) {
      case 'Acquired':
      case 'Renewed':
      case 'TakenOver':
        if (e.status === 'releasing') {
          // Renewed by this person's other tab: the lock lives on there, not here.
          if (mine && ev.op === 'Renewed' && e.releasingUntil) this.#releasedHere(e);
          return;
        }
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
            const expiresLocal = parseTime(ev.lock.expiresAtUtc) - this.#host.skew();
            if (expiresLocal - 2000 < e.nextRenewAt && !e.renewing) void this.#renewEntry(e).catch(() => {});
            this.#notify(e);
          } else if (e.want && e.status !== 'takenOver' && !e.claiming) {
            // Handed to me from the line (PROTOCOL.md §11): the `handoff` that follows
            // makes it ours here, and every socket of mine waiting in line gets one.
            if (this.#host.standing(e.type, e.uid) === 'waiting') return;
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
        if (e.status === 'locked' || e.status === 'free' || e.status === 'claiming' || e.status === 'unknown') {
          if (!e.want) return;
          e.status = 'locked';
          e.lock = ev.lock;
          this.#notify(e);
        }
        return;
      case 'Released':
      case 'Expired':
        if (e.status === 'releasing' && (mine || !e.lock)) {
          e.status = 'released';
          e.lock = null;
          this.#notify(e);
          return;
        }
        if (e.committing) {
          if (mine) e.status = 'released';
          return;
        }
        if (!e.want || e.status === 'takenOver' || e.status === 'released') return;
        if (ev.op === 'Released' && mine && e.status === 'held') {
          // About an older lock of mine (the hub found late that Redis lost it, and
          // this page has claimed it again since): nothing to do.
          if (e.lock && !newerThan(ev.lock, e.lock)) return;
          // A claim is on its way (a reconnect): its answer says whose it is.
          if (e.claiming) return;
          // Mine, released by someone else: the record was decided in another app, or
          // an administrator or another tab let it go. Claiming it back would snatch
          // it from whoever waits for it: read-only, like a takeover.
          this.#endedBy(e, ev);
          return;
        }
        if (e.status === 'locked' && e.lock && e.lock.holderOid !== ev.lock.holderOid) return; // an older holder
        if (e.status === 'locked' && !e.auto) return;
        // In line (PROTOCOL.md §11): the hub gives the lock to the first who waits and
        // sends them `handoff`; a claim of our own would race the one ahead of us.
        if (e.status === 'locked') {
          this.#freed(e);
          return;
        }
        e.status = 'claiming';
        void this.#claimEntry(e, 'claim').catch(() => {});
        return;
      default:
        return;
    }
  }

  /**
   * The lock that kept a wanted entry from us is gone. Claim it, unless this person
   * stands in the entity's line (the hub hands it to the first who waits, and sends us
   * `handoff` if that is us: a claim of our own would race whoever is ahead), or only
   * looks (then it is `free` until they want it again).
   * @param {Entry} e
   */
  #freed(e) {
    const standing = this.#host.standing(e.type, e.uid);
    if (standing === 'waiting') return;
    if (standing === 'looking') {
      e.status = 'free';
      e.lock = null;
      this.#notify(e);
      return;
    }
    void this.#claimEntry(e, 'claim').catch(() => {});
  }

  /**
   * A pending release ended without the lock going: another tab of this person keeps it.
   * This page let go all the same.
   * @param {Entry} e
   */
  #releasedHere(e) {
    e.status = 'released';
    e.note = 'elsewhere';
    e.lock = null;
    e.releasingUntil = 0;
    this.#notify(e);
  }

  /** @param {Entry} e */
  #notify(e) {
    if (e.listeners.size === 0) return;
    const st = stateOf(e);
    for (const fn of e.listeners) safeCall(fn, st);
  }

  #renewMs() {
    const w = this.#host.welcome();
    return w && w.renewMs > 0 ? w.renewMs : 120000;
  }
}
