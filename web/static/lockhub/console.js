// @ts-check
/**
 * The lock console of PROTOCOL.md §10: {@link LockConsole}, made by
 * {@link LockClient#lockConsole}. For people whose token has the admin role.
 *
 * It lists every live lock of the tenant (holder, since, expiry), kept live by a watch
 * of each lockable type the welcome names; offers a Force release per lock, which asks
 * for a confirmation in the row before it sends `forceRelease`; and shows the audit
 * trail of a chosen entity (GET /api/admin/audit, newest first, "Older" follows the
 * cursor). Without the role it says so and shows nothing else.
 *
 * Like the form and the grid it injects no styles: classes `lockhub-console*`, styled
 * by lockhub.css. Elements carry `data-testid` for tests.
 *
 * @module lockhub/console
 */

import { cleanName, formatClock, formatRemaining, holderNameOf, parseTime } from './format.js';
import { messagesOf } from './messages.js';

/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Holder} Holder */
/** @typedef {import('./connection.js').LockClient} LockClient */
/** @typedef {import('./watches.js').Watch} Watch */
/** @typedef {import('./messages.js').Messages} Messages */

/** @typedef {import('./audit.js').AuditEntry} AuditEntry */
/** @typedef {import('./audit.js').AuditPage} AuditPage */

/**
 * @typedef {object} LockConsoleOptions
 * @property {number} [pageSize]  audit entries per page. Default 50.
 * @property {Partial<Messages>} [messages]  the texts the console shows (default English)
 */

/**
 * Builds an element.
 * @param {string} tag @param {string} [cls] @param {string} [text]
 * @returns {HTMLElement}
 */
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * @param {string} text @param {string} testid
 * @returns {HTMLButtonElement}
 */
function button(text, testid) {
  const b = /** @type {HTMLButtonElement} */ (el('button', 'lockhub-console-btn', text));
  b.type = 'button';
  b.dataset.testid = testid;
  return b;
}

/** What an entry says happened, for people. */
/**
 * The tenant's live locks with a Force release each, and an entity's audit trail.
 */
export class LockConsole {
  /** @type {LockClient} */ #client;
  /** @type {HTMLElement} */ #root;
  /** @type {Map<string, Watch>} */ #watches = new Map();
  /** @type {HTMLElement} */ #status;
  /** @type {HTMLTableSectionElement} */ #body;
  /** @type {HTMLElement} */ #trail;
  /** @type {HTMLElement} */ #trailTitle;
  /** @type {HTMLOListElement} */ #entries;
  /** @type {HTMLButtonElement} */ #older;
  /** @type {HTMLSelectElement} */ #pickType;
  /** @type {HTMLInputElement} */ #pickUid;
  /** Rows waiting for the confirmation of a force release, by type/uid. */
  #confirming = new Set();
  /** @type {{type: string, uid: string, next: string|null}|null} */ #shown = null;
  #pageSize;
  #closed = false;
  /** @type {ReturnType<typeof setInterval>} */ #timer;
  /** @type {() => void} */ #unsubWelcome;
  /** @type {Messages} */ #m;

  /**
   * @param {LockClient} client
   * @param {HTMLElement} element  the console's container; its content is replaced
   * @param {LockConsoleOptions} [opts]
   */
  constructor(client, element, opts = {}) {
    this.#client = client;
    this.#root = element;
    this.#pageSize = opts.pageSize || 50;
    const m = messagesOf(opts.messages);
    this.#m = m;
    element.classList.add('lockhub-console');
    this.#status = el('p', 'lockhub-console-status');
    this.#status.dataset.testid = 'console-status';
    this.#status.setAttribute('role', 'status');

    const table = /** @type {HTMLTableElement} */ (el('table', 'lockhub-console-locks'));
    table.dataset.testid = 'console-locks';
    const head = table.createTHead().insertRow();
    for (const h of [...m.consoleColumns, '']) {
      const th = el('th', '', h);
      th.setAttribute('scope', 'col');
      head.append(th);
    }
    this.#body = table.createTBody();

    const pick = el('form', 'lockhub-console-pick');
    pick.dataset.testid = 'console-pick';
    this.#pickType = /** @type {HTMLSelectElement} */ (el('select'));
    this.#pickType.setAttribute('aria-label', m.entityType);
    this.#pickUid = /** @type {HTMLInputElement} */ (el('input'));
    this.#pickUid.placeholder = m.uidPlaceholder;
    this.#pickUid.setAttribute('aria-label', m.entityUid);
    this.#pickUid.dataset.testid = 'console-pick-uid';
    const show = button(m.showHistory, 'console-pick-show');
    show.type = 'submit';
    pick.append(this.#pickType, this.#pickUid, show);
    pick.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const uid = this.#pickUid.value.trim();
      if (uid) void this.showTrail(this.#pickType.value, uid);
    });

    this.#trail = el('section', 'lockhub-console-trail');
    this.#trail.dataset.testid = 'console-trail';
    this.#trail.hidden = true;
    this.#trailTitle = el('h3', 'lockhub-console-trail-title');
    this.#entries = /** @type {HTMLOListElement} */ (el('ol', 'lockhub-console-entries'));
    this.#older = button(m.older, 'console-trail-older');
    this.#older.hidden = true;
    this.#older.addEventListener('click', () => void this.#loadTrail(true));
    this.#trail.append(this.#trailTitle, this.#entries, this.#older);

    element.replaceChildren(this.#status, table, pick, this.#trail);
    this.#timer = setInterval(() => this.#tickExpiry(), 1000);
    this.#unsubWelcome = client.onWelcome((w) => void this.#start(w.lockable));
  }

  /**
   * On every welcome: check the role with `adminLocks`, then watch each lockable type
   * (the watches keep the list live, and make it whole again after a reconnect).
   * @param {string[]} types
   */
  async #start(types) {
    try {
      await this.#client.adminLocks();
    } catch (err) {
      if (this.#closed) return;
      const code = /** @type {{code?: string}} */ (err).code;
      this.#status.textContent = code === 'forbidden'
        ? this.#m.needsAdmin
        : this.#m.locksUnreadable(String(code || err));
      this.#root.dataset.state = code === 'forbidden' ? 'forbidden' : 'error';
      return;
    }
    if (this.#closed) return;
    this.#root.dataset.state = 'open';
    this.#pickType.replaceChildren(...types.map((t) => {
      const o = /** @type {HTMLOptionElement} */ (el('option', '', t));
      o.value = t;
      return o;
    }));
    for (const t of types) {
      if (!this.#watches.has(t)) this.#watches.set(t, this.#client.watch(t, () => this.render()));
    }
    this.render();
  }

  /** Every live lock the console shows, by type then uid. @returns {Lock[]} */
  get locks() {
    const out = [];
    for (const w of this.#watches.values()) out.push(...w.locks.values());
    return out.sort((a, b) => a.entityType.localeCompare(b.entityType) || a.entityUid.localeCompare(b.entityUid));
  }

  /** Redraws the list of locks; called on its own after every change. */
  render() {
    if (this.#closed) return;
    const locks = this.locks;
    this.#status.textContent = this.#m.locksHeld(locks.length);
    const rows = locks.map((l) => this.#row(l));
    if (!rows.length) {
      const tr = document.createElement('tr');
      const td = el('td', 'lockhub-console-empty', this.#m.nobodyHolds);
      td.setAttribute('colspan', '5');
      tr.append(td);
      rows.push(tr);
    }
    this.#body.replaceChildren(...rows);
    for (const key of this.#confirming) {
      if (!locks.some((l) => `${l.entityType}/${l.entityUid}` === key)) this.#confirming.delete(key);
    }
  }

  /** @param {Lock} l @returns {HTMLTableRowElement} */
  #row(l) {
    const key = `${l.entityType}/${l.entityUid}`;
    const tr = document.createElement('tr');
    tr.dataset.testid = 'console-lock';
    tr.dataset.uid = l.entityUid;
    tr.dataset.type = l.entityType;
    const entity = el('td', 'lockhub-console-entity');
    entity.append(el('span', 'lockhub-console-type', l.entityType), ' ', el('strong', '', l.entityUid));
    const holder = el('td', 'lockhub-holder', holderNameOf(l));
    holder.title = l.holderOid;
    const since = el('td', '', formatClock(l.acquiredAtUtc));
    const exp = el('td', 'lockhub-expiry');
    exp.dataset.expires = l.expiresAtUtc;
    this.#expiryText(exp);
    const act = el('td', 'lockhub-console-actions');
    const history = button(this.#m.history, 'console-history');
    history.addEventListener('click', () => void this.showTrail(l.entityType, l.entityUid));
    if (this.#confirming.has(key)) {
      const ask = el('span', 'lockhub-console-confirm', this.#m.confirmRelease(holderNameOf(l)));
      ask.dataset.testid = 'console-confirm-text';
      const yes = button(this.#m.release, 'console-confirm');
      yes.classList.add('lockhub-console-danger');
      yes.addEventListener('click', () => void this.#forceRelease(l, yes));
      const no = button(this.#m.cancel, 'console-cancel');
      no.addEventListener('click', () => {
        this.#confirming.delete(key);
        this.render();
      });
      act.append(ask, yes, no);
    } else {
      const force = button(this.#m.forceRelease, 'console-force');
      force.classList.add('lockhub-console-danger');
      force.addEventListener('click', () => {
        this.#confirming.add(key);
        this.render();
      });
      act.append(force, history);
    }
    tr.append(entity, holder, since, exp, act);
    return tr;
  }

  /** @param {Lock} l @param {HTMLButtonElement} btn */
  async #forceRelease(l, btn) {
    btn.disabled = true;
    const key = `${l.entityType}/${l.entityUid}`;
    try {
      const r = await this.#client.forceRelease(l.entityType, l.entityUid);
      this.#status.textContent = r.outcome === 'released'
        ? this.#m.forceReleased(holderNameOf(r.lock ?? l), l.entityUid)
        : r.outcome === 'notHeld'
          ? this.#m.wasFree(l.entityUid)
          : this.#m.storeDown(l.entityUid);
    } catch (err) {
      this.#status.textContent = this.#m.notReleased(l.entityUid, /** @type {Error} */ (err).message);
    } finally {
      this.#confirming.delete(key);
      this.render();
      if (this.#shown && this.#shown.type === l.entityType && this.#shown.uid === l.entityUid) void this.showTrail(l.entityType, l.entityUid);
    }
  }

  /**
   * Shows the audit trail of one entity, newest first.
   * @param {string} type @param {string} uid
   */
  async showTrail(type, uid) {
    this.#shown = { type, uid, next: null };
    this.#trail.hidden = false;
    this.#trailTitle.textContent = this.#m.historyOf(type, uid);
    this.#entries.replaceChildren();
    await this.#loadTrail(false);
  }

  /** @param {boolean} more  the next, older page of the entity shown */
  async #loadTrail(more) {
    const shown = this.#shown;
    if (!shown) return;
    this.#older.hidden = true;
    try {
      const page = await this.#client.audit({ entityType: shown.type, entityUid: shown.uid, before: more ? shown.next : null, limit: this.#pageSize });
      if (this.#shown !== shown) return; // another entity was chosen meanwhile
      shown.next = page.next;
      this.#entries.append(...page.entries.map((e) => this.#entry(e)));
      if (!more && !page.entries.length) this.#entries.append(el('li', 'lockhub-console-empty', this.#m.nothingRecorded));
      this.#older.hidden = !page.next;
    } catch (err) {
      if (this.#shown === shown) this.#entries.append(el('li', 'lockhub-console-error', this.#m.historyUnreadable(/** @type {Error} */ (err).message)));
    }
  }

  /** @param {AuditEntry} e @returns {HTMLLIElement} */
  #entry(e) {
    const li = /** @type {HTMLLIElement} */ (el('li', 'lockhub-console-entry'));
    li.dataset.testid = 'console-entry';
    li.dataset.op = e.op;
    li.dataset.reason = e.reason;
    const when = el('time', 'lockhub-console-when', new Date(parseTime(e.at)).toLocaleString());
    when.setAttribute('datetime', e.at);
    // A takeover's holder is who took it: the lock was its previous holder's.
    const taken = e.op === 'TakenOver' && e.previous;
    const owner = taken ? e.previous : e.holder;
    const by = taken ? e.holder : e.actor;
    const byName = by && (!owner || by.oid !== owner.oid) ? cleanName(by.name, by.oid) : null;
    const text = this.#m.auditLine(owner ? cleanName(owner.name, owner.oid) : null, e.op, byName, e.reason);
    li.append(when, ' ', el('span', '', text));
    return li;
  }

  /** @param {HTMLElement} exp */
  #expiryText(exp) {
    const at = parseTime(exp.dataset.expires || '');
    exp.textContent = `${formatClock(at)} · ${formatRemaining(at - this.#client.now())}`;
  }

  #tickExpiry() {
    for (const exp of this.#body.querySelectorAll('td.lockhub-expiry')) {
      if (exp instanceof HTMLElement) this.#expiryText(exp);
    }
  }

  /** Stops watching and empties the console. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    this.#unsubWelcome();
    for (const w of this.#watches.values()) w.close();
    this.#watches.clear();
    this.#root.replaceChildren();
  }
}
