// @ts-check
// The connection's timers and close codes, on the fake clock and socket: the token is
// refreshed in band before it expires, 4403 ends the client, 1001 spreads the first
// reconnect, a watch keeps its map live and hides a lock whose lease ran out.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { connect } from '../core.js';
import { ADA, FakeClock, FakeSocket, GRACE, TYPE, answer, connected, lockOf, settle, welcome } from './fake.js';

/** An unsigned JWT-shaped token: the client only reads its exp. @param {number} expMs @param {number} n */
function token(expMs, n) {
  const b64 = (/** @type {object} */ o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${b64({ alg: 'none' })}.${b64({ sub: 'u-ada', exp: Math.floor(expMs / 1000), n })}.sig`;
}

/** A client whose sockets the test opens itself. @param {FakeClock} clock @param {Partial<import('../core.js').ConnectOptions>} [opts] */
function start(clock, opts = {}) {
  /** @type {FakeSocket[]} */
  const sockets = [];
  /** @type {string[]} */
  const states = [];
  const client = connect({
    url: 'ws://hub.test/ws', getToken: () => 'token', clock, onError: () => {},
    createSocket: (u, p) => { const s = new FakeSocket(u, p); sockets.push(s); return s; },
    onState: (s) => states.push(s.state),
    ...opts,
  });
  return { client, sockets, states };
}

describe('the console data (PROTOCOL.md §10)', () => {
  it('adminLocks and forceRelease are requests of the socket', async () => {
    const { client, clock, ws } = await connected();
    const all = client.adminLocks();
    answer(ws, 'adminLocks', { type: 'result', locks: [lockOf('r-1', GRACE, clock)] });
    assert.deepEqual((await all).map((l) => l.holderOid), [GRACE.oid]);
    const fr = client.forceRelease(TYPE, 'r-1');
    const f = answer(ws, 'forceRelease', { type: 'result', outcome: 'released', lock: lockOf('r-1', GRACE, clock) });
    assert.deepEqual([f.entityType, f.entityUid], [TYPE, 'r-1']);
    assert.equal((await fr).outcome, 'released');
    const denied = client.adminLocks();
    answer(ws, 'adminLocks', { type: 'error', code: 'forbidden', message: 'no role' });
    await assert.rejects(denied, (err) => /** @type {any} */ (err).code === 'forbidden');
    client.close();
  });
});

describe('bad options', () => {
  it('say what is missing', () => {
    assert.throws(() => connect(/** @type {any} */ ({})), /connect needs a getToken function/);
    assert.throws(() => connect({ getToken: () => 't' }), /connect needs a url outside a browser page/);
  });
});

describe('connection timers and close codes', () => {
  it('refreshes the token in band 30 s before it expires', async () => {
    const clock = new FakeClock();
    let n = 0;
    const { client, sockets } = start(clock, { getToken: () => token(clock.now() + 120000, ++n) });
    await settle();
    const ws = sockets[0];
    ws.open();
    welcome(ws, ADA, clock);
    await settle();
    await clock.advance(89000);
    assert.equal(ws.frames('auth').length, 1, 'refreshed before expiry - 30 s');
    await clock.advance(1000);
    const refresh = ws.last('auth');
    assert.equal(ws.frames('auth').length, 2);
    assert.ok(refresh.id, 'a refresh is a request with an id');
    assert.notEqual(refresh.token, ws.sent[0].token, 'the refresh sent the same token');
    ws.receive({ id: refresh.id, type: 'result', outcome: 'refreshed' });
    await settle();
    assert.equal(sockets.length, 1, 'a refresh opened a new socket');
    client.close();
  });

  it('4403 ends the client: forbidden, no reconnect, no timer left', async () => {
    const clock = new FakeClock();
    const { client, sockets, states } = start(clock);
    await settle();
    sockets[0].open();
    welcome(sockets[0], ADA, clock);
    await settle();
    sockets[0].drop(4403, 'origin not allowed');
    await clock.advance(60000);
    assert.equal(sockets.length, 1, 'reconnected after 4403');
    assert.equal(client.state.state, 'forbidden');
    assert.equal(states[states.length - 1], 'forbidden');
    assert.equal(clock.pending, 0, 'a timer outlived a forbidden client');
  });

  it('after 1001 the first reconnect waits a random part of 2 s, not the backoff', async () => {
    const clock = new FakeClock();
    const { client, sockets } = start(clock);
    await settle();
    sockets[0].open();
    welcome(sockets[0], ADA, clock);
    await settle();
    sockets[0].drop(1001, 'going away');
    const wait = client.state.retryInMs ?? -1;
    assert.ok(wait >= 0 && wait < 2000, `waits ${wait} ms`);
    await clock.advance(wait);
    assert.equal(sockets.length, 2);
    client.close();
  });

  it('a watch keeps a live map, and hides a lock whose lease ran out before the hub says so', async () => {
    const { client, clock, ws } = await connected();
    /** @type {string[]} */
    const ops = [];
    const w = client.watch(TYPE, (_m, change) => ops.push(change.op + (change.local ? ' local' : '')));
    await settle();
    const short = { ...lockOf('r-2', ADA, clock), expiresAtUtc: new Date(clock.now() + 3000).toISOString() };
    answer(ws, 'watch', { type: 'snapshot', entityType: TYPE, locks: [lockOf('r-1', GRACE, clock), short] });
    await settle(); // the snapshot is applied when its answer resolves
    assert.deepEqual([...w.locks.keys()].sort(), ['r-1', 'r-2']);
    ws.receive({ type: 'lock', op: 'Released', lock: lockOf('r-1', GRACE, clock) });
    assert.deepEqual([...w.locks.keys()], ['r-2']);
    await clock.advance(3500);
    assert.deepEqual([...w.locks.keys()], [], 'the lapsed lock is still shown');
    assert.deepEqual(ops, ['Snapshot', 'Released', 'Expired local']);
    w.close();
    assert.equal(ws.last('unwatch')?.entityType, TYPE);
    client.close();
  });
});
