// @ts-check
/**
 * A detail form that holds the edit lock while it is open: {@link LockForm}, made by
 * {@link LockClient#lockForm}.
 *
 * It draws its banner and its presence (who else is here, PROTOCOL.md §9) with classes
 * and attributes only (`lockhub-banner`, `lockhub-presence`, `data-kind`,
 * `data-activity`, `hidden`), styled by lockhub.css, so that it runs under a
 * Content-Security-Policy without `'unsafe-inline'`.
 *
 * @module lockhub/form
 */

import { safeCall } from './callback.js';
import { activityOf, formatClock, holderNameOf } from './format.js';
import { messagesOf } from './messages.js';
import { LockhubError } from './protocol.js';

/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Result} Result */
/** @typedef {import('./connection.js').LockClient} LockClient */
/** @typedef {import('./holds.js').Hold} Hold */
/** @typedef {import('./holds.js').HoldState} HoldState */
/** @typedef {import('./messages.js').Messages} Messages */
/** @typedef {import('./protocol.js').Intent} Intent */
/** @typedef {import('./protocol.js').Viewer} Viewer */
/** @typedef {import('./protocol.js').Nudge} Nudge */
/** @typedef {import('./presence.js').View} View */
/** @typedef {import('./presence.js').ViewStatus} ViewStatus */

/**
 * @typedef {object} LockFormOptions
 * @property {HTMLElement} [body]
 *   The part that goes inert while someone else holds the lock. Default: the element's
 *   `[data-lockhub-body]`, else the element itself.
 * @property {HTMLElement} [banner]
 *   Where the banner is drawn. Default: a new element placed just before the body.
 * @property {boolean} [takeover]  offer "Take over" (default: when the welcome says canTakeOver)
 * @property {(form: LockForm) => void} [onChange]  after every state change
 * @property {HTMLElement|false} [presence]
 *   Where the others on this entity are listed, with the "Ask … to finish" button and
 *   the holder's notice of who asks. Default: a new element placed just before the
 *   body. `false`: draw nothing (the page reads {@link LockForm#others} itself).
 * @property {(others: OtherViewer[], form: LockForm) => void} [onPresence]
 *   after every change of who else is here or of what they are doing
 * @property {(nudge: Nudge, form: LockForm) => void} [onNudge]
 *   someone asks this person, the holder, to finish
 * @property {Intent} [intent]  `edit` (default): wait in line while someone else holds
 *   the lock, and get it handed over (PROTOCOL.md §11); `look`: only look
 * @property {Partial<Messages>} [messages]  the texts the form shows (default English)
 */

/**
 * Another person on the form's entity, and what they are doing (see {@link activityOf}).
 * @typedef {object} OtherViewer
 * @property {string} oid
 * @property {string} name
 * @property {string} since  RFC 3339
 * @property {'editing'|'waiting'|'viewing'} activity
 * @property {number} position  a waiting person's place in line (1: next), else 0
 */

/**
 * How a nudge ended, as {@link LockForm#nudge} tells it: `nudged` (the holder was
 * asked), `notHeld` (nobody else holds it now), `unknown` (the lock store is down),
 * `rateLimited` (this person asked within the last 30 s), `forbidden` (the hub does
 * not count this form as viewing yet), `failed` (not connected, no answer in time).
 * @typedef {'nudged'|'notHeld'|'unknown'|'rateLimited'|'forbidden'|'failed'} NudgeOutcome
 */

/** How many others a form names before it says "and N more". */
const MAX_NAMED = 8;

/**
 * @typedef {'claiming'|'held'|'locked'|'free'|'takenOver'|'ended'|'unknown'|'releasing'|'released'|'closed'} FormState
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
  /** @type {HTMLButtonElement} */ #waitButton;
  /** @type {Messages} */ #m;
  #ownBanner = false;
  /** @type {LockFormOptions} */ #opts;
  /** @type {Hold} */ #hold;
  /** @type {FormState} */ #state = 'claiming';
  /** @type {Array<() => void>} */ #restore = [];
  #unsubWelcome;
  #closed = false;
  #busy = false;
  /** @type {View} */ #view;
  /** @type {HTMLElement|null} */ #presence = null;
  #ownPresence = false;
  /** @type {HTMLElement} */ #notice;
  /** @type {HTMLUListElement} */ #noticeList;
  /** @type {HTMLUListElement} */ #viewerList;
  /** @type {HTMLElement} */ #nudgeRow;
  /** @type {HTMLButtonElement} */ #nudgeButton;
  /** @type {HTMLElement} */ #nudgeStatus;
  /** @type {Map<string, Nudge>} who asked this person, the holder, to finish; by oid */
  #nudges = new Map();
  /** @type {{holderOid: string, outcome: NudgeOutcome, at: number}|null} the last ask of this person */
  #asked = null;
  #nudging = false;
  #othersKey = '';

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
    this.#m = messagesOf(opts.messages);
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
    this.#button.textContent = this.#m.takeOver;
    this.#button.hidden = true;
    this.#button.addEventListener('click', () => void this.takeover());
    this.#waitButton = document.createElement('button');
    this.#waitButton.type = 'button';
    this.#waitButton.className = 'lockhub-stop-waiting';
    this.#waitButton.dataset.testid = 'lock-stop-waiting';
    this.#waitButton.hidden = true;
    this.#waitButton.addEventListener('click', () => this.setIntent(this.intent === 'edit' ? 'look' : 'edit'));
    this.#banner.append(this.#text, this.#button, this.#waitButton);
    this.#buildPresence(opts.presence);
    this.#hold = client.hold(type, uid, () => this.#render());
    this.#view = client.view(type, uid, {
      intent: opts.intent === 'look' ? 'look' : 'edit',
      onPresence: () => this.#render(),
      onNudge: (n) => this.#nudged(n),
    });
    this.#unsubWelcome = client.onWelcome(() => this.#render());
    this.#render();
  }

  /** The form's state. @returns {FormState} */
  get state() {
    return this.#state;
  }

  /** The lock as last known: mine when held, the other holder's when locked. @returns {Lock|null} */
  get lock() {
    return this.#hold.state.lock;
  }

  /** Whether this form waits in line for the lock (`edit`) or only looks. @returns {Intent} */
  get intent() {
    return this.#view.intent;
  }

  /**
   * This person's place in the waiting line (1: next), 0 when not waiting
   * (PROTOCOL.md §11; always 0 with a hub older than version 3).
   * @returns {number}
   */
  get position() {
    return this.#closed ? 0 : this.#view.position;
  }

  /**
   * Joins the waiting line (`edit`) or leaves it (`look`: "Stop waiting"). A form that
   * only looks does not take the lock when it is freed; joining again puts this person
   * at the end of the line.
   * @param {Intent} intent
   */
  setIntent(intent) {
    if (this.#closed) return;
    this.#view.setIntent(intent);
    // Wanting it again while nobody holds it: claim (the line only forms behind a holder).
    if (intent === 'edit' && this.#hold.state.status === 'free') this.#hold.claim();
    this.#render();
  }

  /**
   * Everyone the hub lists on this entity, this person included, ordered by `since`
   * (PROTOCOL.md §9); empty while not connected, and when the hub has no presence to
   * give (its Redis is down).
   * @returns {Viewer[]}
   */
  get viewers() {
    return this.#closed ? [] : this.#view.viewers;
  }

  /**
   * The other people on this entity and what each is doing: the holder `editing`;
   * while someone holds the lock everyone else `waiting`; while nobody does, `viewing`.
   * @returns {OtherViewer[]}
   */
  get others() {
    if (this.#closed) return [];
    const me = this.#client.me?.oid;
    const holder = this.#holderOid();
    return this.#view.viewers
      .filter((v) => v.oid !== me)
      .map((v) => ({
        oid: v.oid,
        name: v.name,
        since: v.since,
        // Version 3 says who waits and who only looks; an older hub leaves it to the lock.
        activity: v.state === 'looking' ? 'viewing' : v.state === 'waiting' ? 'waiting' : v.state === 'editing' ? 'editing' : activityOf(v.oid, holder),
        position: v.state === 'waiting' && v.position ? v.position : 0,
      }));
  }

  /**
   * Who asked this person, the holder, to finish since they got the lock (the latest
   * ask of each person), oldest first. Cleared when the form stops holding the lock.
   * @returns {Nudge[]}
   */
  get nudges() {
    return [...this.#nudges.values()];
  }

  /**
   * Asks the holder to finish (PROTOCOL.md §9): the hub sends them a `nudge` that
   * their form shows. At most one ask per person per entity per 30 s reaches them.
   * Resolves with how it ended, never rejects; the form shows it next to its button.
   * @returns {Promise<NudgeOutcome>}
   */
  async nudge() {
    if (this.#closed) return 'failed';
    const holderOid = this.lock && this.state === 'locked' ? this.lock.holderOid : '';
    this.#nudging = true;
    this.#render();
    /** @type {NudgeOutcome} */
    let outcome;
    try {
      const r = await this.#view.nudge();
      outcome = r.outcome === 'nudged' || r.outcome === 'notHeld' || r.outcome === 'unknown' ? r.outcome : 'failed';
    } catch (err) {
      if (err instanceof LockhubError && err.code === 'rate_limited') outcome = 'rateLimited';
      else if (err instanceof LockhubError && err.code === 'forbidden') outcome = 'forbidden';
      else {
        console.warn('lockhub: nudge failed', err);
        outcome = 'failed';
      }
    }
    this.#nudging = false;
    this.#asked = { holderOid, outcome, at: Date.now() };
    this.#render();
    return outcome;
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

  /**
   * Releases the lock and keeps the form open, read-only: `releasing` ("Releasing…")
   * while the hub's answer is `pending` (PROTOCOL.md §4: the person's other socket is on
   * an instance not yet known to be dead), then `released`. Resolves with the hub's
   * answer.
   * @returns {Promise<Result|undefined>}
   */
  async release() {
    if (this.#closed) return undefined;
    this.#view.setIntent('look');
    try {
      return await this.#hold.release();
    } catch (err) {
      console.warn('lockhub: release failed', err);
      return undefined;
    } finally {
      this.#render();
    }
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
    this.#view.close();
    this.#nudges.clear();
    if (this.#presence) {
      if (this.#ownPresence) this.#presence.remove();
      else {
        this.#presence.hidden = true;
        this.#presence.replaceChildren();
      }
    }
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
    const e = this.#hold.state;
    const m = this.#m;
    const prev = this.#state;
    /** @type {FormState} */
    const state = e.status;
    this.#state = state;
    this.#el.dataset.lockState = state;
    const focusInside = this.#body.contains(document.activeElement);

    // `free`: this person stopped waiting and the lock went; the form stays as it was
    // until they want it again.
    const blocked = state === 'locked' || state === 'free';
    this.#body.inert = blocked;
    const lost = state === 'takenOver' || state === 'ended' || state === 'releasing' || state === 'released';
    this.#setReadOnly(lost);
    if (state === 'claiming') this.#body.setAttribute('aria-busy', 'true');
    else this.#body.removeAttribute('aria-busy');

    let text = '';
    let kind = '';
    const position = this.position;
    if (state === 'locked' && e.lock) {
      text = m.lockedBy(holderNameOf(e.lock), formatClock(e.lock.acquiredAtUtc), formatClock(e.lock.expiresAtUtc));
      if (position > 0) text += m.place(position);
      if (e.note === 'forbidden') text += m.notAllowed;
      kind = 'locked';
    } else if (state === 'locked') {
      text = m.lockedBySomeone;
      kind = 'locked';
    } else if (state === 'free') {
      text = m.free;
      kind = 'locked';
    } else if (state === 'takenOver') {
      const who = e.takenBy ? e.takenBy.name : m.someone;
      text = m.takenOver(who, formatClock(e.takenAt));
      kind = 'takenOver';
    } else if (state === 'ended') {
      // Released by a named person (an administrator's force release, §10), or by
      // another program that says nothing of who (the .NET API deciding it, §8).
      text = e.takenBy
        ? m.releasedBy(e.takenBy.name, formatClock(e.takenAt))
        : m.releasedElsewhere(formatClock(e.takenAt));
      kind = 'takenOver';
    } else if (state === 'unknown') {
      text = e.note && e.note !== 'forbidden' ? m.withoutLock(e.note) : m.unavailable;
      kind = 'quiet';
    } else if (state === 'releasing') {
      text = m.releasing;
      kind = 'quiet';
    } else if (state === 'released') {
      text = e.note === 'elsewhere' ? m.releasedHere : m.released;
      kind = 'quiet';
    }
    this.#banner.dataset.kind = kind;
    this.#banner.setAttribute('role', kind === 'takenOver' ? 'alert' : 'status');
    if (this.#text.textContent !== text) this.#text.textContent = text;
    this.#banner.hidden = text === '';
    const offer = this.#opts.takeover ?? this.#client.canTakeOver;
    this.#button.hidden = !(blocked && offer && e.lock);
    // "Stop waiting" while in line; after it, a way back into the line.
    const inLine = blocked && (position > 0 || this.intent === 'look') && this.#view.status === 'viewing';
    this.#waitButton.hidden = !inLine;
    const waitLabel = this.intent === 'edit' ? m.stopWaiting : state === 'free' ? m.edit : m.waitInLine;
    if (this.#waitButton.textContent !== waitLabel) this.#waitButton.textContent = waitLabel;
    this.#el.dataset.lockPosition = String(position);
    this.#renderPresence();

    if (prev !== state) {
      if (blocked && focusInside) this.#banner.focus();
      if (lost && (focusInside || document.activeElement === document.body)) this.#banner.focus();
      if (state === 'held' && (prev === 'locked' || prev === 'takenOver')) {
        const a = document.activeElement;
        if (!a || a === document.body || a === this.#banner || this.#banner.contains(a)) focusFirst(this.#body);
      }
      if (this.#opts.onChange) safeCall(this.#opts.onChange, this);
    }
  }

  /** Who holds the lock, as far as the form knows: me, the other holder, or nobody. */
  #holderOid() {
    const e = this.#hold.state;
    if (e.status === 'held') return this.#client.me?.oid || null;
    if ((e.status === 'locked' || e.status === 'takenOver') && e.lock) return e.lock.holderOid;
    return null;
  }

  /** @param {Nudge} n */
  #nudged(n) {
    if (this.#closed) return;
    this.#nudges.delete(n.from.oid); // the latest ask of each person, in the order they came
    this.#nudges.set(n.from.oid, n);
    this.#render();
    if (this.#opts.onNudge) safeCall(this.#opts.onNudge, n, this);
  }

  /** @param {HTMLElement|false|undefined} where */
  #buildPresence(where) {
    /** @type {(tag: string, cls: string, testid: string) => HTMLElement} */
    const el = (tag, cls, testid) => {
      const x = document.createElement(tag);
      x.className = cls;
      if (testid) x.dataset.testid = testid;
      return x;
    };
    this.#notice = el('div', 'lockhub-nudged', 'lock-nudged');
    this.#notice.setAttribute('role', 'alert');
    this.#notice.hidden = true;
    this.#noticeList = /** @type {HTMLUListElement} */ (el('ul', 'lockhub-nudged-list', 'lock-nudged-list'));
    const dismiss = /** @type {HTMLButtonElement} */ (el('button', 'lockhub-dismiss', 'lock-nudged-dismiss'));
    dismiss.type = 'button';
    dismiss.textContent = this.#m.dismiss;
    dismiss.addEventListener('click', () => {
      this.#nudges.clear();
      this.#render();
    });
    this.#notice.append(this.#noticeList, dismiss);
    this.#viewerList = /** @type {HTMLUListElement} */ (el('ul', 'lockhub-viewers', 'lock-viewers'));
    this.#viewerList.setAttribute('aria-label', this.#m.alsoHere);
    this.#nudgeRow = el('div', 'lockhub-nudge-row', '');
    this.#nudgeRow.hidden = true;
    this.#nudgeButton = /** @type {HTMLButtonElement} */ (el('button', 'lockhub-nudge', 'lock-nudge'));
    this.#nudgeButton.type = 'button';
    this.#nudgeButton.addEventListener('click', () => void this.nudge());
    this.#nudgeStatus = el('span', 'lockhub-nudge-status', 'lock-nudge-status');
    this.#nudgeStatus.setAttribute('role', 'status');
    this.#nudgeRow.append(this.#nudgeButton, this.#nudgeStatus);
    if (where === false) return;
    if (where) {
      this.#presence = where;
    } else {
      this.#presence = document.createElement('div');
      this.#ownPresence = true;
      this.#body.before(this.#presence);
    }
    this.#presence.classList.add('lockhub-presence');
    if (!this.#presence.dataset.testid) this.#presence.dataset.testid = 'lock-presence';
    this.#presence.hidden = true;
    this.#presence.replaceChildren(this.#notice, this.#viewerList, this.#nudgeRow);
  }

  #renderPresence() {
    const e = this.#hold.state;
    const m = this.#m;
    const others = this.others;
    const key = others.map((o) => `${o.oid}\u0000${o.name}\u0000${o.activity}\u0000${o.position}`).join('\u0001');
    const changed = key !== this.#othersKey;
    this.#othersKey = key;

    // The holder's notice: who asked to finish, while the lock is theirs.
    if (e.status !== 'held') this.#nudges.clear();
    const nudges = this.nudges;
    this.#notice.hidden = nudges.length === 0;
    this.#noticeList.replaceChildren(...nudges.map((n) => {
      const li = document.createElement('li');
      li.dataset.oid = n.from.oid;
      li.textContent = m.nudged(n.from.name, formatClock(n.at));
      return li;
    }));

    // Who else is here.
    // With a line (PROTOCOL.md §11): the holder, then who waits in line order, then who
    // looks; else the hub's order (by since).
    const rank = (/** @type {OtherViewer} */ o) => (o.activity === 'editing' ? 0 : o.position > 0 ? o.position : Infinity);
    const ordered = others.some((o) => o.position > 0) ? [...others].sort((a, b) => rank(a) - rank(b)) : others;
    const named = ordered.length > MAX_NAMED ? ordered.slice(0, MAX_NAMED - 1) : ordered;
    const items = named.map((o) => {
      const li = document.createElement('li');
      li.className = 'lockhub-viewer';
      li.dataset.oid = o.oid;
      li.dataset.activity = o.activity;
      li.dataset.testid = `viewer-${o.oid}`;
      if (o.position) li.dataset.position = String(o.position);
      li.title = o.since ? m.hereSince(formatClock(o.since)) : '';
      li.textContent = m.viewer(o.name, o.activity, o.position);
      return li;
    });
    if (named.length < others.length) {
      const li = document.createElement('li');
      li.className = 'lockhub-viewer-more';
      li.textContent = m.more(others.length - named.length);
      items.push(li);
    }
    if (changed) this.#viewerList.replaceChildren(...items);
    this.#viewerList.hidden = others.length === 0;

    // The waiting person's "Ask NAME to finish".
    const lock = e.lock;
    const canAsk = e.status === 'locked' && !!lock && lock.holderOid !== this.#client.me?.oid && this.#view.status === 'viewing';
    this.#nudgeRow.hidden = !canAsk;
    if (canAsk && lock) {
      const label = m.askToFinish(holderNameOf(lock));
      if (this.#nudgeButton.textContent !== label) this.#nudgeButton.textContent = label;
      this.#nudgeButton.disabled = this.#nudging;
      const asked = this.#asked && this.#asked.holderOid === lock.holderOid ? this.#asked : null;
      const holderHere = this.#view.viewers.some((v) => v.oid === lock.holderOid);
      const text = this.#nudging ? m.asking : asked ? m.asked(asked.outcome, holderNameOf(lock), formatClock(asked.at), holderHere) : '';
      if (this.#nudgeStatus.textContent !== text) this.#nudgeStatus.textContent = text;
      if (asked && !this.#nudging) this.#nudgeStatus.dataset.outcome = asked.outcome;
      else delete this.#nudgeStatus.dataset.outcome;
    }

    if (this.#presence) this.#presence.hidden = others.length === 0 && nudges.length === 0 && !canAsk;
    if (changed && this.#opts.onPresence) safeCall(this.#opts.onPresence, others, this);
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
