// @ts-check
/**
 * The entities a client views, and who else views each (PROTOCOL.md §9): `view` while
 * something is open on an entity, `unview` when the last thing closes, the viewers of
 * every `presence` frame, and the `nudge` frames that reach the holder. Internal to the
 * client: {@link LockClient} owns one {@link Views}, hands out its {@link View} handles,
 * and feeds it the welcome, the end of each socket, and the `presence` and `nudge`
 * frames; {@link LockForm} views its entity through {@link LockClient#view}.
 *
 * Presence frames are applied in the order they arrive, answers and unsolicited ones
 * alike (the hub sends them in order on one socket), synchronously from the socket's
 * message event: an answer is never applied later, after a newer unsolicited frame.
 *
 * @module lockhub/presence
 */

import { safeCall } from './callback.js';
import { cleanName } from './format.js';
import { LockhubError } from './protocol.js';

/** @typedef {import('./protocol.js').Viewer} Viewer */
/** @typedef {import('./protocol.js').Nudge} Nudge */
/** @typedef {import('./protocol.js').Intent} Intent */
/** @typedef {import('./connection.js').LockClient} LockClient */

/**
 * Where a view stands: `pending` (asked, or waiting for the connection), `viewing`
 * (the hub answered; the viewers are its latest list), `refused` (the hub said
 * `too_many_views` or refused the entity; asked again after a reconnect),
 * `unsupported` (the hub does not know `view`: a hub older than PROTOCOL.md version 2).
 * @typedef {'pending'|'viewing'|'refused'|'unsupported'} ViewStatus
 */

/**
 * A view of one entity, made by {@link LockClient#view}. Its viewers are everyone the
 * hub lists, this person included; empty while there is no connection, and when the
 * hub has no presence to give (its Redis is down: fail open).
 * @typedef {object} View
 * @property {string} type
 * @property {string} uid
 * @property {Viewer[]} viewers  ordered by `since`, one entry per person
 * @property {ViewStatus} status
 * @property {Intent} intent  this handle's intent
 * @property {Viewer|null} me  this person's own entry, if the hub lists them
 * @property {number} position  this person's place in the waiting line (1: next), 0 when
 *   not waiting (PROTOCOL.md §11)
 * @property {(intent: Intent) => void} setIntent  changes this handle's intent; the hub
 *   hears the strongest intent of the client's views of the entity (edit over look)
 * @property {() => Promise<import('./protocol.js').Result>} nudge  asks the holder to finish (see {@link LockClient#nudge})
 * @property {() => void} close  stops viewing (the last view of the entity sends `unview`)
 */

/**
 * What one viewer of an entity is told.
 * @typedef {object} ViewListener
 * @property {(viewers: Viewer[], status: ViewStatus) => void} [onPresence]
 *   after every change of the viewers or of the status
 * @property {(n: Nudge) => void} [onNudge]  a viewer asks this person, the holder, to finish
 * @property {Intent} [intent]  `look` (default) or `edit` (PROTOCOL.md §9, version 3)
 */

/**
 * What the views need of their client. Every member is read when it is needed.
 * @typedef {object} ViewsHost
 * @property {(frame: Record<string, unknown>) => Promise<any>} request
 *   sends a request once the connection is up, and not again after a reconnect
 * @property {() => boolean} authed  a socket is authenticated now
 * @property {() => string|undefined} me  this person's oid, from the welcome
 * @property {(err: unknown) => void} onError
 */

/**
 * The state of one viewed entity.
 * @typedef {object} Entry
 * @property {string} key
 * @property {string} type
 * @property {string} uid
 * @property {Viewer[]} viewers
 * @property {ViewStatus} status
 * @property {Set<ViewListener>} listeners
 * @property {Map<ViewListener, Intent>} intents  each handle's intent
 * @property {Intent} sent  the intent last sent to the hub
 */

/** @param {string} type @param {string} uid */
function keyOf(type, uid) {
  return `${type}\u0000${uid}`;
}

/**
 * The viewed entities of one client. Runs on the page's one thread, called only by its
 * {@link LockClient}.
 */
export class Views {
  /** @type {ViewsHost} */
  #host;
  /** @type {Map<string, Entry>} */
  #entries = new Map();
  /**
   * Answers still to come, on this socket, to views of entries closed before they were
   * answered: such an answer is about the closed entry, not a new one of the same key.
   * @type {Map<string, number>}
   */
  #stale = new Map();
  /** @type {Map<string, number>} views sent and not answered yet on this socket, by key */
  #unanswered = new Map();
  #warnedUnsupported = false;

  /** @param {ViewsHost} host */
  constructor(host) {
    this.#host = host;
  }

  /**
   * Views an entity until the handle's close: see {@link LockClient#view}.
   * @param {string} type
   * @param {string} uid
   * @param {ViewListener} listener
   * @param {(type: string, uid: string) => Promise<any>} nudge
   * @returns {View}
   */
  view(type, uid, listener, nudge) {
    const key = keyOf(type, uid);
    let e = this.#entries.get(key);
    if (!e) {
      e = { key, type, uid, viewers: [], status: 'pending', listeners: new Set(), intents: new Map(), sent: 'look' };
      this.#entries.set(key, e);
    }
    const entry = e;
    // A listener object may be shared by two views: each handle gets its own key.
    const own = { ...listener };
    entry.listeners.add(own);
    entry.intents.set(own, listener.intent === 'edit' ? 'edit' : 'look');
    if (entry.listeners.size === 1) {
      if (this.#host.authed()) this.#send(entry);
    } else {
      this.#intentChanged(entry);
    }
    let closed = false;
    const views = this;
    return {
      type,
      uid,
      get viewers() {
        return closed ? [] : entry.viewers.slice(); // a copy: the page may keep or sort it
      },
      get status() {
        return entry.status;
      },
      get intent() {
        return entry.intents.get(own) || 'look';
      },
      get me() {
        return closed ? null : views.#mine(entry);
      },
      get position() {
        const m = closed ? null : views.#mine(entry);
        return m && m.state === 'waiting' && m.position ? m.position : 0;
      },
      setIntent: (intent) => {
        if (closed) return;
        entry.intents.set(own, intent === 'edit' ? 'edit' : 'look');
        this.#intentChanged(entry);
      },
      nudge: () => nudge(type, uid),
      close: () => {
        if (closed) return;
        closed = true;
        entry.listeners.delete(own);
        entry.intents.delete(own);
        if (entry.listeners.size === 0) this.#drop(entry, true);
        else this.#intentChanged(entry);
      },
    };
  }

  /**
   * Where this person stands on an entity, as the hub last said (PROTOCOL.md §9, §11):
   * `waiting` in its line, `looking` (this page's intent is look), or null when the hub
   * does not tell (older than version 3), nothing views it, or the hub has not put this
   * person in line yet.
   * @param {string} type @param {string} uid
   * @returns {'waiting'|'looking'|null}
   */
  standing(type, uid) {
    const e = this.#entries.get(keyOf(type, uid));
    if (!e) return null;
    const m = this.#mine(e);
    if (!m || !m.state) return null;
    // A look is this page's own choice, whatever the hub said last; a wait counts once
    // the hub has put this person in line (until then a claim is what takes the lock).
    if (this.#intentOf(e) === 'look') return 'looking';
    return m.state === 'waiting' ? 'waiting' : null;
  }

  /** @param {Entry} e @returns {Viewer|null} */
  #mine(e) {
    const me = this.#host.me();
    return (me && e.viewers.find((v) => v.oid === me)) || null;
  }

  /** The strongest intent of an entry's handles. @param {Entry} e @returns {Intent} */
  #intentOf(e) {
    for (const i of e.intents.values()) if (i === 'edit') return 'edit';
    return 'look';
  }

  /** A handle's intent changed: tells the hub when the strongest did. @param {Entry} e */
  #intentChanged(e) {
    if (this.#intentOf(e) === e.sent || !this.#host.authed() || e.status === 'unsupported') return;
    this.#send(e);
  }

  /** Forgets every view, sending `unview` for each (the client closes). */
  dropAll() {
    for (const e of [...this.#entries.values()]) this.#drop(e, true);
  }

  // ------------------------------------------------------------------ what the connection tells

  /** After a welcome: views every entity again, so that a new hub knows (PROTOCOL.md §9). */
  connected() {
    for (const e of this.#entries.values()) this.#send(e);
  }

  /** The socket closed: nobody is known to be here until the next answer. */
  disconnected() {
    this.#stale.clear();
    this.#unanswered.clear();
    for (const e of this.#entries.values()) {
      const had = e.viewers.length > 0 || e.status !== 'pending';
      e.viewers = [];
      if (e.status !== 'unsupported') e.status = 'pending';
      if (had) this.#notify(e);
    }
  }

  /**
   * A `presence` frame: the answer to a view (with `id`) or a change (without). Called
   * from the socket's message event, in arrival order.
   * @param {{id?: string, entityType: string, entityUid: string, viewers?: unknown}} f
   */
  presence(f) {
    const key = keyOf(f.entityType, f.entityUid);
    if (f.id !== undefined) {
      if (this.#take(this.#stale, key)) return; // about an entry closed since
      this.#take(this.#unanswered, key);
    }
    const e = this.#entries.get(key);
    if (!e) return;
    e.viewers = cleanViewers(f.viewers);
    e.status = 'viewing';
    this.#notify(e);
  }

  /**
   * A `nudge` frame: someone asks this person, the holder, to finish.
   * @param {{entityType: string, entityUid: string, from?: {oid: string, name: string}, at?: string}} f
   */
  nudge(f) {
    const e = this.#entries.get(keyOf(f.entityType, f.entityUid));
    if (!e || !f.from || typeof f.from.oid !== 'string') return;
    /** @type {Nudge} */
    const n = {
      entityType: e.type,
      entityUid: e.uid,
      from: { oid: f.from.oid, name: cleanName(f.from.name, f.from.oid) },
      at: typeof f.at === 'string' ? f.at : new Date().toISOString(),
    };
    for (const l of e.listeners) if (l.onNudge) safeCall(l.onNudge, n);
  }

  // ------------------------------------------------------------------ entries

  /** @param {Entry} e */
  #send(e) {
    e.status = 'pending';
    e.sent = this.#intentOf(e);
    this.#unanswered.set(e.key, (this.#unanswered.get(e.key) || 0) + 1);
    /** @type {Record<string, unknown>} */
    const frame = { type: 'view', entityType: e.type, entityUid: e.uid };
    // Version 3. A view without intent is a look (and changes an edit to a look), so a
    // look goes as the frame an older hub knows.
    if (e.sent === 'edit') frame.intent = 'edit';
    this.#host.request(frame).then(
      () => {
        /* applied by presence(), in arrival order */
      },
      (err) => {
        if (!(err instanceof LockhubError) || err.code === 'disconnected' || err.code === 'closed') return;
        if (this.#entries.get(e.key) !== e) {
          // The entry closed while its view was on its way: its answer will not come.
          this.#take(this.#stale, e.key);
          return;
        }
        this.#take(this.#unanswered, e.key);
        if (err.code === 'timeout') return; // the heartbeat gives a silent hub up; the reconnect views again
        if (err.code === 'bad_request') {
          // A hub that predates presence: the form works without it.
          e.status = 'unsupported';
          if (!this.#warnedUnsupported) {
            this.#warnedUnsupported = true;
            this.#host.onError(new LockhubError(err.code, `lockhub: the hub does not support presence (${err.message})`));
          }
        } else {
          // too_many_views, invalid_entity, not_lockable, rate_limited: no presence here.
          e.status = 'refused';
          this.#host.onError(err);
        }
        e.viewers = [];
        this.#notify(e);
      },
    );
  }

  /** @param {Entry} e @param {boolean} unview */
  #drop(e, unview) {
    if (this.#entries.get(e.key) !== e) return;
    this.#entries.delete(e.key);
    e.listeners.clear();
    e.viewers = [];
    const open = this.#take(this.#unanswered, e.key, Infinity);
    if (open > 0) this.#stale.set(e.key, (this.#stale.get(e.key) || 0) + open);
    if (unview && this.#host.authed() && e.status !== 'unsupported') {
      void this.#host.request({ type: 'unview', entityType: e.type, entityUid: e.uid }).catch(() => {});
    }
  }

  /**
   * Takes up to n from the count of key in m; returns how many it took.
   * @param {Map<string, number>} m @param {string} key @param {number} [n]
   */
  #take(m, key, n = 1) {
    const have = m.get(key) || 0;
    const took = Math.min(have, n);
    if (have - took > 0) m.set(key, have - took);
    else m.delete(key);
    return took;
  }

  /** @param {Entry} e */
  #notify(e) {
    for (const l of e.listeners) if (l.onPresence) safeCall(l.onPresence, e.viewers, e.status);
  }
}

/**
 * The viewers of a presence frame, as far as they are well-formed: one entry per oid
 * (the hub sends one already; a repeat is dropped), in the hub's order (by `since`).
 * @param {unknown} list
 * @returns {Viewer[]}
 */
export function cleanViewers(list) {
  if (!Array.isArray(list)) return [];
  /** @type {Viewer[]} */
  const out = [];
  const seen = new Set();
  for (const v of list) {
    if (!v || typeof v !== 'object' || typeof v.oid !== 'string' || v.oid === '' || seen.has(v.oid)) continue;
    seen.add(v.oid);
    /** @type {Viewer} */
    const c = {
      oid: v.oid,
      name: cleanName(v.name, v.oid),
      since: typeof v.since === 'string' ? v.since : '',
    };
    if (v.state === 'editing' || v.state === 'waiting' || v.state === 'looking') c.state = v.state;
    if (c.state === 'waiting' && Number.isInteger(v.position) && v.position > 0) c.position = v.position;
    out.push(c);
  }
  return out;
}
