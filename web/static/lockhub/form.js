// @ts-check
/**
 * A detail form that holds the edit lock while it is open: {@link LockForm}, made by
 * {@link LockClient#lockForm}.
 *
 * It draws its banner with classes and attributes only (`lockhub-banner`, `data-kind`,
 * `hidden`), styled by lockhub.css, so that it runs under a Content-Security-Policy
 * without `'unsafe-inline'`.
 *
 * @module lockhub/form
 */

import { safeCall } from './callback.js';
import { formatClock, lockedByText } from './format.js';

/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Result} Result */
/** @typedef {import('./connection.js').LockClient} LockClient */
/** @typedef {import('./holds.js').Hold} Hold */

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
 * @typedef {'claiming'|'held'|'locked'|'takenOver'|'ended'|'unknown'|'released'|'closed'} FormState
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
  /** @type {Hold} */ #hold;
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
    const lost = state === 'takenOver' || state === 'ended';
    this.#setReadOnly(lost);
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
    } else if (state === 'ended') {
      const who = e.takenBy ? `${e.takenBy.name} released` : 'Your lock was released elsewhere';
      text = `${who}${e.takenBy ? ' your lock' : ''} at ${formatClock(e.takenAt)} (the record may have been decided in another app). The form is read-only; reopen it to edit again.`;
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
      if (lost && (focusInside || document.activeElement === document.body)) this.#banner.focus();
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
