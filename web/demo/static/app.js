// @ts-check
/**
 * The lockhub demo page: the "My approvals" screen of the story, for QA and for the
 * end-to-end tests. Open it twice as two people (`/?user=u-ada`, `/?user=u-grace`) to
 * watch edit locks live. `&open=r-1001` opens a request at once.
 *
 * It signs in with development tokens (POST /dev/token, PROTOCOL.md §6), lists
 * GET /api/approval-requests in a grid with a live "Locked by" column (lockGrid), and
 * opens a request in a detail form that holds the edit lock while it is open
 * (lockForm), with Approve, Reject and Save calling the guarded API (§5).
 */
import { connect, jwtExpiry, lockedByText, formatClock } from '/static/lockhub.js';

const TYPE = 'ApprovalRequest';

/**
 * The people of the demo. Three office users and a supervisor of tenant acme, and
 * one user of tenant globex who must see none of acme's locks.
 * @type {Array<{oid: string, name: string, tenant: string, roles: string[], role: string}>}
 */
const USERS = [
  { oid: 'u-ada', name: 'Ada Lovelace', tenant: 'acme', roles: [], role: 'Office' },
  { oid: 'u-grace', name: 'Grace Hopper', tenant: 'acme', roles: [], role: 'Office' },
  { oid: 'u-edsger', name: 'Edsger Dijkstra', tenant: 'acme', roles: [], role: 'Office' },
  { oid: 'u-margaret', name: 'Margaret Hamilton', tenant: 'acme', roles: ['Locks.TakeOver'], role: 'Supervisor' },
  { oid: 'u-linus', name: 'Linus Torvalds', tenant: 'globex', roles: [], role: 'Office' },
];

/** @param {string} id */
function $(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`demo: no #${id}`);
  return el;
}

const els = {
  picker: /** @type {HTMLSelectElement} */ ($('user-picker')),
  conn: /** @type {HTMLElement} */ (document.querySelector('[data-testid="conn"]')),
  connText: /** @type {HTMLElement} */ (document.querySelector('[data-testid="conn-text"]')),
  connDetail: /** @type {HTMLElement} */ (document.querySelector('[data-testid="conn-detail"]')),
  signin: $('signin'),
  signinList: $('signin-list'),
  gridCard: $('grid-card'),
  gridSub: $('grid-sub'),
  gridNotice: $('grid-notice'),
  grid: /** @type {HTMLTableElement} */ ($('grid')),
  gridBody: /** @type {HTMLTableSectionElement} */ ($('grid-body')),
  reload: $('reload'),
  detail: $('detail'),
  form: /** @type {HTMLFormElement} */ ($('detail-form')),
  body: $('form-body'),
  banner: $('lock-banner'),
  uid: $('detail-uid'),
  title: $('detail-title'),
  requester: $('f-requester'),
  status: $('f-status'),
  carrier: $('f-carrier'),
  route: $('f-route'),
  factCarrier: $('fact-carrier'),
  factRoute: $('fact-route'),
  fTitle: /** @type {HTMLInputElement} */ ($('f-title')),
  fAmount: /** @type {HTMLInputElement} */ ($('f-amount')),
  currency: $('f-currency'),
  approve: /** @type {HTMLButtonElement} */ ($('approve')),
  reject: /** @type {HTMLButtonElement} */ ($('reject')),
  save: /** @type {HTMLButtonElement} */ ($('save')),
  close: $('close-detail'),
  message: $('form-message'),
};

// ----------------------------------------------------------------------- who am I

const params = new URLSearchParams(location.search);
const user = USERS.find((u) => u.oid === params.get('user')) || null;

for (const u of USERS) {
  const opt = document.createElement('option');
  opt.value = u.oid;
  opt.textContent = `${u.name} (${u.tenant}${u.roles.length ? ', supervisor' : ''})`;
  els.picker.append(opt);
}
els.picker.value = user ? user.oid : '';
els.picker.addEventListener('change', () => {
  const next = new URLSearchParams();
  if (els.picker.value) next.set('user', els.picker.value);
  location.search = next.toString();
});

if (!user) {
  showSignin();
} else {
  start(user);
}

function showSignin() {
  els.signin.hidden = false;
  for (const u of USERS) {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.href = `?user=${encodeURIComponent(u.oid)}`;
    a.className = 'signin-user';
    a.dataset.testid = `signin-${u.oid}`;
    const name = document.createElement('strong');
    name.textContent = u.name;
    const meta = document.createElement('span');
    meta.className = 'muted';
    meta.textContent = `${u.role} · tenant ${u.tenant}${u.roles.length ? ' · may take over locks' : ''}`;
    a.append(name, meta);
    li.append(a);
    els.signinList.append(li);
  }
  setConn('idle', 'Not signed in');
}

// ----------------------------------------------------------------------- the app

/** @param {typeof USERS[number]} me */
function start(me) {
  document.title = `My approvals · ${me.name}`;
  /** @type {{token: string, exp: number|null}|null} */
  let cached = null;
  /** @type {Promise<string>|null} */
  let inflight = null;

  /**
   * A development token, fetched again when less than 45 s of it is left, or when the
   * server refused it (a restarted development server signs with a new key).
   * @param {{rejected?: boolean}} [why]
   */
  function getToken(why = {}) {
    if (why.rejected) cached = null;
    if (cached && (cached.exp === null || cached.exp - Date.now() > 45000)) return Promise.resolve(cached.token);
    if (inflight) return inflight;
    inflight = (async () => {
      try {
        const res = await fetch('/dev/token', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ tenant: me.tenant, oid: me.oid, name: me.name, roles: me.roles }),
        });
        if (!res.ok) throw new Error(`POST /dev/token answered ${res.status}`);
        const { token } = await res.json();
        cached = { token, exp: jwtExpiry(token) };
        return token;
      } finally {
        inflight = null;
      }
    })();
    return inflight;
  }

  /**
   * Calls the API with the bearer token. Never throws: a network failure is status 0.
   * @param {string} method
   * @param {string} path
   * @param {unknown} [body]
   * @param {Record<string, string>} [headers]
   * @param {boolean} [retried]
   * @returns {Promise<{ok: boolean, status: number, data: any, etag: string|null}>}
   */
  async function api(method, path, body, headers = {}, retried = false) {
    try {
      const token = await getToken({ rejected: retried });
      /** @type {Record<string, string>} */
      const h = { Authorization: `Bearer ${token}`, Accept: 'application/json', ...headers };
      if (body !== undefined) h['Content-Type'] = 'application/json';
      const res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
      // A token the server no longer accepts: once more with a fresh one.
      if (res.status === 401 && !retried) return api(method, path, body, headers, true);
      let data = null;
      if (res.status !== 204) {
        try {
          data = await res.json();
        } catch {
          data = null;
        }
      }
      return { ok: res.ok, status: res.status, data, etag: res.headers.get('ETag') };
    } catch (err) {
      return { ok: false, status: 0, data: { code: 'network', message: String(err) }, etag: null };
    }
  }

  const client = connect({
    getToken,
    onState: (s) => {
      switch (s.state) {
        case 'open':
          setConn('open', 'Live');
          break;
        case 'connecting':
          setConn('connecting', 'Connecting…');
          break;
        case 'reconnecting':
          setConn('reconnecting', 'Reconnecting…', s.retryInMs !== undefined ? `retry in ${Math.max(1, Math.ceil(s.retryInMs / 1000))} s` : '');
          break;
        case 'forbidden':
          setConn('forbidden', 'Not allowed: reload the page');
          break;
        default:
          setConn('closed', 'Disconnected');
      }
    },
  });

  els.gridCard.hidden = false;
  els.gridSub.textContent = `Tenant ${me.tenant} · ${me.name}${me.roles.length ? ' · supervisor, may take over locks' : ''}`;

  /** The open request, if any. @type {{uid: string, row: any, etag: string|null, form: import('/static/lockhub.js').LockForm}|null} */
  let current = null;
  let openSeq = 0;

  // -------------------------------------------------------------------- the grid

  /** @type {Map<string, any>} */
  const rows = new Map();
  const money = (/** @type {number} */ n, /** @type {string} */ c) => {
    try {
      return new Intl.NumberFormat('en-GB', { style: 'currency', currency: c || 'EUR' }).format(n);
    } catch {
      return `${n} ${c}`;
    }
  };

  /** @param {any} r */
  function statusText(r) {
    if (r.status === 'approved') return `Approved${r.decidedBy ? ` by ${r.decidedBy.name}` : ''}`;
    if (r.status === 'rejected') return `Rejected${r.decidedBy ? ` by ${r.decidedBy.name}` : ''}`;
    return 'Pending';
  }

  /** @param {any} r */
  function rowElement(r) {
    const tr = document.createElement('tr');
    tr.dataset.uid = r.uid;
    tr.dataset.testid = `row-${r.uid}`;
    if (current && current.uid === r.uid) tr.setAttribute('aria-current', 'true');
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'linklike';
    open.dataset.testid = `open-${r.uid}`;
    open.textContent = r.uid;
    open.setAttribute('aria-label', `Open ${r.uid}: ${r.title}`);
    /** @type {Array<[Node, string]>} */
    const cells = [
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
    tr.cells[1].title = r.title;
    return tr;
  }

  /** @param {string} s @param {string} [cls] */
  function text(s, cls) {
    const span = document.createElement('span');
    span.textContent = s ?? '';
    if (cls) span.className = cls;
    return span;
  }

  /** The status pill, and who decided under it. @param {any} r */
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

  /** @param {any} r */
  function updateRow(r) {
    rows.set(r.uid, r);
    const old = els.gridBody.querySelector(`tr[data-uid="${CSS.escape(r.uid)}"]`);
    const fresh = rowElement(r);
    if (old) old.replaceWith(fresh);
    if (current && current.uid === r.uid) fill(r, null);
  }

  let loading = false;
  async function loadRows() {
    if (loading) return;
    loading = true;
    els.grid.setAttribute('aria-busy', 'true');
    const res = await api('GET', '/api/approval-requests');
    loading = false;
    els.grid.removeAttribute('aria-busy');
    if (!res.ok) {
      notice(`Could not load the requests: ${errorText(res)}`, 'error');
      return;
    }
    const list = (res.data && res.data.rows) || [];
    rows.clear();
    for (const r of list) rows.set(r.uid, r);
    els.gridBody.replaceChildren(...list.map(rowElement));
    els.grid.dataset.loaded = 'true';
  }

  /** @type {Map<string, ReturnType<typeof setTimeout>>} */
  const refetch = new Map();
  /** Fetches one row again soon: another person may have decided it. @param {string} uid */
  function refreshRow(uid) {
    if (refetch.has(uid)) return;
    refetch.set(uid, setTimeout(async () => {
      refetch.delete(uid);
      const res = await api('GET', `/api/approval-requests/${encodeURIComponent(uid)}`);
      if (res.ok && res.data) updateRow(res.data);
    }, 150));
  }

  const grid = client.lockGrid(els.grid, TYPE, 'data-uid', {
    onChange: (_locks, change) => {
      // A lock ends when someone decides (approve and reject release it): show the
      // decision without reloading the whole grid.
      if (change.lock && (change.op === 'Released' || change.op === 'TakenOver')) refreshRow(change.lock.entityUid);
    },
  });
  void grid;

  let welcomed = false;
  client.onWelcome(() => {
    // After a reconnect the rows may have changed too.
    if (welcomed) void loadRows();
    welcomed = true;
  });

  els.gridBody.addEventListener('click', (ev) => {
    const target = /** @type {HTMLElement} */ (ev.target);
    const tr = target.closest('tr[data-uid]');
    if (tr instanceof HTMLTableRowElement && tr.dataset.uid) void openDetail(tr.dataset.uid);
  });
  els.reload.addEventListener('click', () => void loadRows());

  // -------------------------------------------------------------------- the detail form

  /** @param {string} uid @param {{focus?: boolean}} [opts] */
  async function openDetail(uid, opts = {}) {
    if (current && current.uid === uid) {
      els.title.focus();
      return;
    }
    closeDetail(false);
    const seq = ++openSeq;
    clearMessage();
    // Claim at once, while the row loads.
    const form = client.lockForm(els.form, TYPE, uid, {
      body: els.body,
      banner: els.banner,
      onChange: (f) => {
        // The lock is ours now: a "Blocked" answer from before no longer holds.
        if (f.state === 'held' && els.message.dataset.kind === 'error') clearMessage();
        updateActions();
      },
    });
    current = { uid, row: rows.get(uid) || null, etag: null, form };
    markOpenRow();
    els.detail.hidden = false;
    els.detail.dataset.uid = uid;
    if (current.row) fill(current.row, null);
    else {
      els.uid.textContent = uid;
      els.title.textContent = 'Loading…';
    }
    if (opts.focus !== false) els.title.focus();
    const res = await api('GET', `/api/approval-requests/${encodeURIComponent(uid)}`);
    if (seq !== openSeq || !current) return;
    if (!res.ok) {
      showMessage(`Could not load ${uid}: ${errorText(res)}`, 'error');
      return;
    }
    current.etag = res.etag;
    fill(res.data, res.etag);
  }

  /** @param {any} r @param {string|null} etag */
  function fill(r, etag) {
    if (!current) return;
    current.row = r;
    // The row's version is its ETag (PROTOCOL.md §5), for If-Match on Save.
    if (etag) current.etag = etag;
    else if (r.version !== undefined) current.etag = `"${r.version}"`;
    els.uid.textContent = `${r.uid} · ${money(r.amount, r.currency)}`;
    els.title.textContent = r.title;
    els.requester.textContent = r.requester;
    els.status.textContent = statusText(r) + (r.decidedAtUtc ? ` at ${formatClock(r.decidedAtUtc)}` : '');
    els.status.className = `status status-${r.status}`;
    if (document.activeElement !== els.fTitle) els.fTitle.value = r.title;
    if (document.activeElement !== els.fAmount) els.fAmount.value = String(r.amount);
    els.currency.textContent = `(${r.currency})`;
    els.carrier.textContent = r.carrier || '';
    els.factCarrier.hidden = !r.carrier;
    els.route.textContent = r.origin && r.destination ? `${r.origin} → ${r.destination}` : '';
    els.factRoute.hidden = !(r.origin && r.destination);
    updateActions();
  }

  function updateActions() {
    if (!current) return;
    els.detail.dataset.lockState = current.form.state;
    if (!current.row) return;
    const decided = current.row.status !== 'pending';
    if (current.form.state !== 'takenOver') {
      els.approve.disabled = decided;
      els.reject.disabled = decided;
    }
  }

  function markOpenRow() {
    for (const tr of els.gridBody.rows) {
      if (current && tr.dataset.uid === current.uid) tr.setAttribute('aria-current', 'true');
      else tr.removeAttribute('aria-current');
    }
  }

  /** @param {boolean} restoreFocus */
  function closeDetail(restoreFocus) {
    if (!current) return;
    const uid = current.uid;
    current.form.close();
    current = null;
    openSeq++;
    els.detail.hidden = true;
    delete els.detail.dataset.uid;
    delete els.detail.dataset.lockState;
    clearMessage();
    markOpenRow();
    if (restoreFocus) {
      const btn = els.gridBody.querySelector(`[data-testid="open-${CSS.escape(uid)}"]`);
      if (btn instanceof HTMLElement) btn.focus();
    }
  }

  /** @param {'approve'|'reject'} kind */
  async function decide(kind) {
    const cur = current;
    if (!cur) return;
    clearMessage();
    setBusy(true);
    const path = `/api/approval-requests/${encodeURIComponent(cur.uid)}/${kind}`;
    const res = await cur.form.commit(() => api('POST', path), (r) => r.ok);
    setBusy(false);
    if (res.ok) {
      if (current === cur) {
        current = null; // commit closed the form and its lock
        els.detail.hidden = true;
        markOpenRow();
      }
      updateRow(res.data);
      notice(`${cur.uid} ${kind === 'approve' ? 'approved' : 'rejected'}.`, 'success');
      const btn = els.gridBody.querySelector(`[data-testid="open-${CSS.escape(cur.uid)}"]`);
      if (btn instanceof HTMLElement) btn.focus();
      return;
    }
    if (current !== cur) return;
    showMessage(errorText(res), 'error');
    if (res.status === 409 && res.data && res.data.code === 'already_decided') refreshRow(cur.uid);
  }

  async function save() {
    const cur = current;
    if (!cur) return;
    clearMessage();
    const amount = Number(els.fAmount.value);
    if (!els.fTitle.value.trim() || !Number.isFinite(amount)) {
      showMessage('Enter a title and an amount.', 'error');
      return;
    }
    setBusy(true);
    /** @type {Record<string, string>} */
    const headers = cur.etag ? { 'If-Match': cur.etag } : {};
    const res = await api('PUT', `/api/entities/${TYPE}/${encodeURIComponent(cur.uid)}`, { title: els.fTitle.value.trim(), amount }, headers);
    setBusy(false);
    if (current !== cur) return;
    if (res.ok) {
      cur.etag = res.etag || (res.data && res.data.version !== undefined ? `"${res.data.version}"` : cur.etag);
      els.fTitle.blur();
      updateRow(res.data);
      showMessage('Saved.', 'success');
    } else {
      showMessage(errorText(res), 'error');
    }
  }

  /** @param {boolean} on */
  function setBusy(on) {
    els.form.toggleAttribute('aria-busy', on);
    for (const b of [els.approve, els.reject, els.save]) b.classList.toggle('is-busy', on);
  }

  els.approve.addEventListener('click', () => void decide('approve'));
  els.reject.addEventListener('click', () => void decide('reject'));
  els.save.addEventListener('click', () => void save());
  els.form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void save();
  });
  els.close.addEventListener('click', () => closeDetail(true));
  els.detail.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') closeDetail(true);
  });

  // -------------------------------------------------------------------- messages

  /** @param {{status: number, data: any}} res */
  function errorText(res) {
    const d = res.data || {};
    switch (res.status) {
      case 409:
        if (d.code === 'locked' && d.lock) return `Blocked: ${lockedByText(d.lock)}. Your change was not saved.`;
        if (d.code === 'already_decided') return 'This request has already been decided.';
        return `Conflict: ${d.message || d.code || 'try again'}.`;
      case 412:
        return 'Someone changed this request meanwhile. Close it and open it again.';
      case 401:
        return 'Your session has expired. Reload the page.';
      case 404:
        return 'This request no longer exists.';
      case 503:
        return 'The request store is unavailable. Try again in a moment.';
      case 0:
        return 'The server cannot be reached.';
      default:
        return `${d.message || d.code || 'Error'} (HTTP ${res.status})`;
    }
  }

  /** @param {string} msg @param {'error'|'success'} kind */
  function showMessage(msg, kind) {
    els.message.textContent = msg;
    els.message.dataset.kind = kind;
    els.message.setAttribute('role', kind === 'error' ? 'alert' : 'status');
    els.message.hidden = false;
  }

  function clearMessage() {
    els.message.hidden = true;
    els.message.textContent = '';
    delete els.message.dataset.kind;
  }

  /** @type {ReturnType<typeof setTimeout>|undefined} */
  let noticeTimer;
  /** @param {string} msg @param {'error'|'success'} kind */
  function notice(msg, kind) {
    els.gridNotice.textContent = msg;
    els.gridNotice.dataset.kind = kind;
    clearTimeout(noticeTimer);
    if (kind === 'success') noticeTimer = setTimeout(() => {
      els.gridNotice.textContent = '';
      delete els.gridNotice.dataset.kind;
    }, 6000);
  }

  // -------------------------------------------------------------------- go

  // For QA in the console and for the end-to-end tests.
  Object.assign(window, {
    lockhubDemo: {
      client,
      user: me,
      get current() {
        return current ? { uid: current.uid, state: current.form.state } : null;
      },
      open: openDetail,
      close: () => closeDetail(false),
      reload: loadRows,
    },
  });

  void loadRows().then(() => {
    const open = params.get('open');
    if (open) void openDetail(open);
  });
}

/**
 * Shows the connection state. The label is announced (the indicator is a polite live
 * region) only when it changes; the retry countdown is for the eye.
 * @param {string} state @param {string} label @param {string} [detail]
 */
function setConn(state, label, detail = '') {
  els.conn.dataset.state = state;
  if (els.connText.textContent !== label) els.connText.textContent = label;
  els.connDetail.textContent = detail ? `(${detail})` : '';
}
