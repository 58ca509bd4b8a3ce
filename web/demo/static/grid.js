// @ts-check
/**
 * The grid of approval requests: GET /api/approval-requests in a table, with lockhub's
 * live "Locked by" column (lockGrid), rows fetched again when a lock ends (someone may
 * have decided), and the notice above it. Row checkboxes and "Approve selected" call
 * the demo's bulk approve (PROTOCOL.md §12), which locks every row it approves, all or
 * none, and names who holds the rows it could not take.
 */
import { cleanName } from '/static/lockhub.js';
import { byId } from './dom.js';
import { TYPE } from './session.js';
import { errorText, money } from './text.js';

/** @typedef {import('/static/lockhub.js').LockClient} LockClient */
/** @typedef {import('./session.js').Session} Session */
/** @typedef {import('./session.js').Row} Row */

/**
 * The grid card. Its state: the rows as last fetched, by uid, and which one is open
 * in the detail form (marked `aria-current`).
 */
export class GridView {
  /** The rows as last fetched, by uid. @type {Map<string, Row>} */
  rows = new Map();
  /** Called with the uid of a row the user opens. @type {(uid: string) => void} */
  onOpen = () => {};
  /** Called with a row fetched again (after a write or a lock's end). @type {(row: Row) => void} */
  onRowUpdated = () => {};

  #card = byId('grid-card');
  #sub = byId('grid-sub');
  #notice = byId('grid-notice');
  #table = /** @type {HTMLTableElement} */ (byId('grid'));
  #body = /** @type {HTMLTableSectionElement} */ (byId('grid-body'));
  #approveSelected = /** @type {HTMLButtonElement} */ (byId('approve-selected'));
  #selectAll = /** @type {HTMLInputElement} */ (byId('select-all'));
  /** The uids checked for a bulk approve. @type {Set<string>} */
  selected = new Set();
  #approving = false;
  /** @type {Session} */
  #session;
  /** The uid open in the detail form, if any. @type {string|null} */
  #openUid = null;
  #loading = false;
  #welcomed = false;
  /** Rows to fetch again, each once, shortly. @type {Map<string, ReturnType<typeof setTimeout>>} */
  #refetch = new Map();
  /** @type {ReturnType<typeof setTimeout>|undefined} */
  #noticeTimer;

  /**
   * Shows the card, and keeps its Locked by column live.
   * @param {LockClient} client
   * @param {Session} session
   * @param {import('./users.js').User} me
   */
  constructor(client, session, me) {
    this.#session = session;
    this.#card.hidden = false;
    this.#sub.textContent = `Tenant ${me.tenant} · ${me.name}${me.roles.includes('Locks.TakeOver') ? ' · supervisor, may take over locks' : ''}`;
    client.lockGrid(this.#table, TYPE, 'data-uid', {
      onChange: (_locks, change) => {
        // A lock ends when someone decides (approve and reject release it): show the
        // decision without reloading the whole grid.
        if (change.lock && (change.op === 'Released' || change.op === 'TakenOver')) this.refreshRow(change.lock.entityUid);
      },
    });
    client.onWelcome(() => {
      // After a reconnect the rows may have changed too.
      if (this.#welcomed) void this.load();
      this.#welcomed = true;
    });
    this.#body.addEventListener('click', (ev) => {
      const target = /** @type {HTMLElement} */ (ev.target);
      if (target.closest('.col-pick')) return; // a checkbox, not an open
      const tr = target.closest('tr[data-uid]');
      if (tr instanceof HTMLTableRowElement && tr.dataset.uid) this.onOpen(tr.dataset.uid);
    });
    this.#body.addEventListener('change', (ev) => {
      const box = ev.target;
      if (!(box instanceof HTMLInputElement) || !box.dataset.pick) return;
      if (box.checked) this.selected.add(box.dataset.pick);
      else this.selected.delete(box.dataset.pick);
      this.#updateSelection();
    });
    this.#selectAll.addEventListener('change', () => {
      this.selected.clear();
      if (this.#selectAll.checked) for (const r of this.rows.values()) if (r.status === 'pending') this.selected.add(r.uid);
      for (const box of this.#body.querySelectorAll('input[data-pick]')) {
        if (box instanceof HTMLInputElement) box.checked = this.selected.has(box.dataset.pick || '');
      }
      this.#updateSelection();
    });
    this.#approveSelected.addEventListener('click', () => void this.approveSelected());
    byId('reload').addEventListener('click', () => void this.load());
  }

  /**
   * Approves every selected request at once (POST /api/approval-requests/approve): the
   * demo claims them all, approves each one still pending and releases them, or
   * changes nothing when someone else holds any of them (409, naming who).
   */
  async approveSelected() {
    const uids = [...this.selected];
    if (uids.length === 0 || this.#approving) return;
    this.#approving = true;
    this.#updateSelection();
    const res = await this.#session.api('POST', '/api/approval-requests/approve', { uids });
    this.#approving = false;
    if (res.ok) {
      /** @type {Row[]} */
      const rows = (res.data && res.data.rows) || [];
      for (const r of rows) this.update(r);
      this.selected.clear();
      this.#selectAll.checked = false;
      this.notice(rows.length === 1 ? 'Approved 1 request.' : `Approved ${rows.length} requests.`, 'success');
    } else if (res.status === 409 && res.data && res.data.code === 'locked' && Array.isArray(res.data.locks)) {
      this.notice(`Nothing was approved: ${lockedText(res.data.locks)}.`, 'error');
    } else {
      this.notice(`Nothing was approved: ${errorText(res)}`, 'error');
    }
    this.#updateSelection();
  }

  #updateSelection() {
    for (const uid of [...this.selected]) if (this.rows.get(uid)?.status !== 'pending') this.selected.delete(uid);
    const n = this.selected.size;
    this.#approveSelected.disabled = n === 0 || this.#approving;
    this.#approveSelected.textContent = n === 0 ? 'Approve selected' : `Approve selected (${n})`;
    this.#approveSelected.setAttribute('aria-busy', String(this.#approving));
  }

  /** Fetches every row and redraws the table. */
  async load() {
    if (this.#loading) return;
    this.#loading = true;
    this.#table.setAttribute('aria-busy', 'true');
    const res = await this.#session.api('GET', '/api/approval-requests');
    this.#loading = false;
    this.#table.removeAttribute('aria-busy');
    if (!res.ok) {
      this.notice(`Could not load the requests: ${errorText(res)}`, 'error');
      return;
    }
    /** @type {Row[]} */
    const list = (res.data && res.data.rows) || [];
    this.rows.clear();
    for (const r of list) this.rows.set(r.uid, r);
    this.#body.replaceChildren(...list.map((r) => this.#rowElement(r)));
    this.#updateSelection();
    this.#table.dataset.loaded = 'true';
  }

  /**
   * Shows a row as fetched again, and tells onRowUpdated.
   * @param {Row} r
   */
  update(r) {
    this.rows.set(r.uid, r);
    const old = this.#body.querySelector(`tr[data-uid="${CSS.escape(r.uid)}"]`);
    const fresh = this.#rowElement(r);
    if (old) old.replaceWith(fresh);
    this.#updateSelection();
    this.onRowUpdated(r);
  }

  /** Fetches one row again soon: another person may have decided it. @param {string} uid */
  refreshRow(uid) {
    if (this.#refetch.has(uid)) return;
    this.#refetch.set(uid, setTimeout(async () => {
      this.#refetch.delete(uid);
      const res = await this.#session.api('GET', `/api/approval-requests/${encodeURIComponent(uid)}`);
      if (res.ok && res.data) this.update(res.data);
    }, 150));
  }

  /** Marks the row open in the detail form, or none. @param {string|null} uid */
  markOpen(uid) {
    this.#openUid = uid;
    for (const tr of this.#body.rows) {
      if (uid !== null && tr.dataset.uid === uid) tr.setAttribute('aria-current', 'true');
      else tr.removeAttribute('aria-current');
    }
  }

  /** Moves the focus to a row's open button. @param {string} uid */
  focusRow(uid) {
    const btn = this.#body.querySelector(`[data-testid="open-${CSS.escape(uid)}"]`);
    if (btn instanceof HTMLElement) btn.focus();
  }

  /**
   * Says something above the grid; a success goes away after a while.
   * @param {string} msg @param {'error'|'success'} kind
   */
  notice(msg, kind) {
    this.#notice.textContent = msg;
    this.#notice.dataset.kind = kind;
    clearTimeout(this.#noticeTimer);
    if (kind === 'success') this.#noticeTimer = setTimeout(() => {
      this.#notice.textContent = '';
      delete this.#notice.dataset.kind;
    }, 6000);
  }

  /** @param {Row} r */
  #rowElement(r) {
    const tr = document.createElement('tr');
    tr.dataset.uid = r.uid;
    tr.dataset.testid = `row-${r.uid}`;
    if (this.#openUid === r.uid) tr.setAttribute('aria-current', 'true');
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'linklike';
    open.dataset.testid = `open-${r.uid}`;
    open.textContent = r.uid;
    open.setAttribute('aria-label', `Open ${r.uid}: ${r.title}`);
    const pick = document.createElement('input');
    pick.type = 'checkbox';
    pick.dataset.pick = r.uid;
    pick.dataset.testid = `pick-${r.uid}`;
    pick.checked = this.selected.has(r.uid);
    pick.disabled = r.status !== 'pending';
    pick.setAttribute('aria-label', `Select ${r.uid}`);
    /** @type {Array<[Node, string]>} */
    const cells = [
      [pick, 'col-pick'],
      [open, 'col-uid'],
      [text(r.title), 'col-title'],
      [text(r.requester), 'col-requester'],
      [text(money(r.amount, r.currency)), 'col-amount num'],
      [badge(r), 'col-status'],
    ];
    for (const [c, cls] of cells) {
      const td = document.createElement('td');
      td.className = cls;
      td.append(c);
      tr.append(td);
    }
    tr.cells[2].title = r.title;
    return tr;
  }
}

/**
 * Who holds the rows a bulk approve could not take: "r-1001 is locked by Ada Lovelace".
 * @param {Array<{entityUid: string, holderName?: string, holderOid?: string}>} locks
 */
function lockedText(locks) {
  return locks.map((l) => `${l.entityUid} is locked by ${cleanName(l.holderName, l.holderOid || '')}`).join(', ');
}

/** @param {string} s @param {string} [cls] */
function text(s, cls) {
  const span = document.createElement('span');
  span.textContent = s ?? '';
  if (cls) span.className = cls;
  return span;
}

/** The status pill, and who decided under it. @param {Row} r */
function badge(r) {
  const wrap = document.createElement('span');
  wrap.className = 'status-wrap';
  wrap.dataset.testid = `status-${r.uid}`;
  const pill = document.createElement('span');
  pill.className = `status status-${r.status}`;
  pill.textContent = r.status === 'approved' ? 'Approved' : r.status === 'rejected' ? 'Rejected' : 'Pending';
  wrap.append(pill);
  if (r.status !== 'pending' && r.decidedBy) {
    const by = document.createElement('span');
    by.className = 'decided-by';
    by.textContent = ` by ${r.decidedBy.name}`;
    wrap.append(by);
  }
  return wrap;
}
