// @ts-check
/**
 * A table that shows who holds its rows: {@link LockGrid}, made by
 * {@link LockClient#lockGrid}.
 *
 * It marks rows with classes and data attributes only (`lockhub-locked`,
 * `lockhub-mine`, `data-lock-state`), styled by lockhub.css, so that it runs under a
 * Content-Security-Policy without `'unsafe-inline'`.
 *
 * @module lockhub/grid
 */

import { safeCall } from './callback.js';
import { formatClock, formatRemaining, holderNameOf, parseTime } from './format.js';
import { messagesOf } from './messages.js';

/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Change} Change */
/** @typedef {import('./connection.js').LockClient} LockClient */
/** @typedef {import('./watches.js').Watch} Watch */
/** @typedef {import('./messages.js').Messages} Messages */

/**
 * @typedef {object} LockGridOptions
 * @property {string} [header]  the column header. Default: messages.gridHeader ("Locked by").
 * @property {Partial<Messages>} [messages]  the texts the grid shows (default English)
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
  /** @type {Messages} */ #m;
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
    this.#m = messagesOf(opts.messages);
    this.#header = opts.header || this.#m.gridHeader;
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
        row.dataset.lockHolder = holderNameOf(lock);
        row.title = state === 'mine'
          ? this.#m.youEditUntil(formatClock(lock.expiresAtUtc))
          : this.#m.lockedBy(holderNameOf(lock), formatClock(lock.acquiredAtUtc), formatClock(lock.expiresAtUtc));
        const name = document.createElement('span');
        name.className = 'lockhub-holder';
        name.textContent = holderNameOf(lock);
        const parts = [name];
        if (state === 'mine') {
          const you = document.createElement('span');
          you.className = 'lockhub-you';
          you.textContent = this.#m.you;
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
    exp.textContent = this.#m.until(formatClock(at), formatRemaining(left));
    exp.setAttribute('aria-label', this.#m.until(formatClock(at), '').replace(/ · $/, ''));
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
