// @ts-check
/**
 * The detail form of one approval request. It holds the edit lock while it is open
 * (lockhub's lockForm), and its Approve, Reject and Save call the guarded API
 * (PROTOCOL.md §5): a 409 shows who blocked the write, and a decision releases the lock.
 * Under the banner the form lists who else has the request open (PROTOCOL.md §9), offers
 * someone blocked "Ask … to finish", and shows the holder who asks.
 */
import { formatClock } from '/static/lockhub.js';
import { byId } from './dom.js';
import { TYPE } from './session.js';
import { errorText, money, statusText } from './text.js';

/** @typedef {import('/static/lockhub.js').LockClient} LockClient */
/** @typedef {import('/static/lockhub.js').LockForm} LockForm */
/** @typedef {import('/static/lockhub.js').FormState} FormState */
/** @typedef {import('./session.js').Session} Session */
/** @typedef {import('./session.js').Row} Row */
/** @typedef {import('./grid.js').GridView} GridView */

/**
 * The request open in the form: its row as last fetched, the row's version as ETag
 * (for If-Match on Save), and the lockForm holding its lock.
 * @typedef {object} OpenRequest
 * @property {string} uid
 * @property {Row|null} row
 * @property {string|null} etag
 * @property {LockForm} form
 */

/**
 * The detail card. Its state: the open request, if any, and a counter of openings, so
 * that the answer of a fetch for a request closed meanwhile is dropped.
 */
export class DetailView {
  /** The open request, if any. @type {OpenRequest|null} */
  current = null;
  #openSeq = 0;

  /** @type {LockClient} */
  #client;
  /** @type {Session} */
  #session;
  /** @type {GridView} */
  #grid;

  #card = byId('detail');
  #form = /** @type {HTMLFormElement} */ (byId('detail-form'));
  #body = byId('form-body');
  #banner = byId('lock-banner');
  #presence = byId('lock-presence');
  #uid = byId('detail-uid');
  #title = byId('detail-title');
  #requester = byId('f-requester');
  #status = byId('f-status');
  #carrier = byId('f-carrier');
  #route = byId('f-route');
  #factCarrier = byId('fact-carrier');
  #factRoute = byId('fact-route');
  #fTitle = /** @type {HTMLInputElement} */ (byId('f-title'));
  #fAmount = /** @type {HTMLInputElement} */ (byId('f-amount'));
  #currency = byId('f-currency');
  #approve = /** @type {HTMLButtonElement} */ (byId('approve'));
  #reject = /** @type {HTMLButtonElement} */ (byId('reject'));
  #save = /** @type {HTMLButtonElement} */ (byId('save'));
  #message = byId('form-message');

  /**
   * @param {LockClient} client
   * @param {Session} session
   * @param {GridView} grid  the rows it opens, and where a decision shows
   */
  constructor(client, session, grid) {
    this.#client = client;
    this.#session = session;
    this.#grid = grid;
    this.#approve.addEventListener('click', () => void this.#decide('approve'));
    this.#reject.addEventListener('click', () => void this.#decide('reject'));
    this.#save.addEventListener('click', () => void this.#saveChanges());
    this.#form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.#saveChanges();
    });
    byId('close-detail').addEventListener('click', () => this.close(true));
    this.#card.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') this.close(true);
    });
  }

  /**
   * The open request, its lock state, who else is on it and who asked to finish, for QA.
   * @returns {{uid: string, state: FormState, others: import('/static/lockhub.js').OtherViewer[],
   *   nudges: import('/static/lockhub.js').Nudge[]}|null}
   */
  get summary() {
    const cur = this.current;
    return cur ? { uid: cur.uid, state: cur.form.state, others: cur.form.others, nudges: cur.form.nudges } : null;
  }

  /**
   * Opens a request: claims its lock at once, while its row loads.
   * @param {string} uid @param {{focus?: boolean}} [opts]
   */
  async open(uid, opts = {}) {
    if (this.current && this.current.uid === uid) {
      this.#title.focus();
      return;
    }
    this.close(false);
    const seq = ++this.#openSeq;
    this.#clearMessage();
    const form = this.#client.lockForm(this.#form, TYPE, uid, {
      body: this.#body,
      banner: this.#banner,
      presence: this.#presence,
      onChange: (f) => {
        // The lock is ours now: a "Blocked" answer from before no longer holds.
        if (f.state === 'held' && this.#message.dataset.kind === 'error') this.#clearMessage();
        this.#updateActions();
      },
    });
    this.current = { uid, row: this.#grid.rows.get(uid) || null, etag: null, form };
    this.#grid.markOpen(uid);
    this.#card.hidden = false;
    this.#card.dataset.uid = uid;
    if (this.current.row) this.#fill(this.current.row, null);
    else {
      this.#uid.textContent = uid;
      this.#title.textContent = 'Loading…';
    }
    if (opts.focus !== false) this.#title.focus();
    const res = await this.#session.api('GET', `/api/approval-requests/${encodeURIComponent(uid)}`);
    if (seq !== this.#openSeq || !this.current) return;
    if (!res.ok) {
      this.#showMessage(`Could not load ${uid}: ${errorText(res)}`, 'error');
      return;
    }
    this.current.etag = res.etag;
    this.#fill(res.data, res.etag);
  }

  /**
   * Closes the form, releasing its lock.
   * @param {boolean} restoreFocus  back to the row's open button
   */
  close(restoreFocus) {
    if (!this.current) return;
    const uid = this.current.uid;
    this.current.form.close();
    this.current = null;
    this.#openSeq++;
    this.#card.hidden = true;
    delete this.#card.dataset.uid;
    delete this.#card.dataset.lockState;
    this.#clearMessage();
    this.#grid.markOpen(null);
    if (restoreFocus) this.#grid.focusRow(uid);
  }

  /** A row was fetched again: show it if it is the open one. @param {Row} r */
  rowUpdated(r) {
    if (this.current && this.current.uid === r.uid) this.#fill(r, null);
  }

  /** @param {Row} r @param {string|null} etag */
  #fill(r, etag) {
    const cur = this.current;
    if (!cur) return;
    cur.row = r;
    // The row's version is its ETag (PROTOCOL.md §5), for If-Match on Save.
    if (etag) cur.etag = etag;
    else if (r.version !== undefined) cur.etag = `"${r.version}"`;
    this.#uid.textContent = `${r.uid} · ${money(r.amount, r.currency)}`;
    this.#title.textContent = r.title;
    this.#requester.textContent = r.requester;
    this.#status.textContent = statusText(r) + (r.decidedAtUtc ? ` at ${formatClock(r.decidedAtUtc)}` : '');
    this.#status.className = `status status-${r.status}`;
    if (document.activeElement !== this.#fTitle) this.#fTitle.value = r.title;
    if (document.activeElement !== this.#fAmount) this.#fAmount.value = String(r.amount);
    this.#currency.textContent = `(${r.currency})`;
    this.#carrier.textContent = r.carrier || '';
    this.#factCarrier.hidden = !r.carrier;
    this.#route.textContent = r.origin && r.destination ? `${r.origin} → ${r.destination}` : '';
    this.#factRoute.hidden = !(r.origin && r.destination);
    this.#updateActions();
  }

  #updateActions() {
    const cur = this.current;
    if (!cur) return;
    this.#card.dataset.lockState = cur.form.state;
    if (!cur.row) return;
    const decided = cur.row.status !== 'pending';
    if (cur.form.state !== 'takenOver' && cur.form.state !== 'ended') {
      this.#approve.disabled = decided;
      this.#reject.disabled = decided;
    }
  }

  /** @param {'approve'|'reject'} kind */
  async #decide(kind) {
    const cur = this.current;
    if (!cur) return;
    this.#clearMessage();
    this.#setBusy(true);
    const path = `/api/approval-requests/${encodeURIComponent(cur.uid)}/${kind}`;
    const res = await cur.form.commit(() => this.#session.api('POST', path), (r) => r.ok);
    this.#setBusy(false);
    if (res.ok) {
      if (this.current === cur) {
        this.current = null; // commit closed the form and its lock
        this.#card.hidden = true;
        this.#grid.markOpen(null);
      }
      this.#grid.update(res.data);
      this.#grid.notice(`${cur.uid} ${kind === 'approve' ? 'approved' : 'rejected'}.`, 'success');
      this.#grid.focusRow(cur.uid);
      return;
    }
    if (this.current !== cur) return;
    this.#showMessage(errorText(res), 'error');
    if (res.status === 409 && res.data && res.data.code === 'already_decided') this.#grid.refreshRow(cur.uid);
  }

  async #saveChanges() {
    const cur = this.current;
    if (!cur) return;
    this.#clearMessage();
    const amount = Number(this.#fAmount.value);
    if (!this.#fTitle.value.trim() || !Number.isFinite(amount)) {
      this.#showMessage('Enter a title and an amount.', 'error');
      return;
    }
    this.#setBusy(true);
    /** @type {Record<string, string>} */
    const headers = cur.etag ? { 'If-Match': cur.etag } : {};
    const res = await this.#session.api('PUT', `/api/entities/${TYPE}/${encodeURIComponent(cur.uid)}`, { title: this.#fTitle.value.trim(), amount }, headers);
    this.#setBusy(false);
    if (this.current !== cur) return;
    if (res.ok) {
      cur.etag = res.etag || (res.data && res.data.version !== undefined ? `"${res.data.version}"` : cur.etag);
      this.#fTitle.blur();
      this.#grid.update(res.data);
      this.#showMessage('Saved.', 'success');
    } else {
      this.#showMessage(errorText(res), 'error');
    }
  }

  /** @param {boolean} on */
  #setBusy(on) {
    this.#form.toggleAttribute('aria-busy', on);
    for (const b of [this.#approve, this.#reject, this.#save]) b.classList.toggle('is-busy', on);
  }

  /** @param {string} msg @param {'error'|'success'} kind */
  #showMessage(msg, kind) {
    this.#message.textContent = msg;
    this.#message.dataset.kind = kind;
    this.#message.setAttribute('role', kind === 'error' ? 'alert' : 'status');
    this.#message.hidden = false;
  }

  #clearMessage() {
    this.#message.hidden = true;
    this.#message.textContent = '';
    delete this.#message.dataset.kind;
  }
}
