// @ts-check
// The headless core against a fake socket and a fake clock (node --test): the frames
// it sends, what it makes of the hub's answers and events, and its timers, exactly.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { LockhubError } from '../core.js';
import { ADA, EDSGER, FakeClock, FakeSocket, GRACE, TYPE, answer, connected, lockOf, settle, welcome } from './fake.js';

describe('connection', () => {
  it('authenticates with the first frame and is open at the welcome', async () => {
    const { client, ws } = await connected();
    assert.equal(ws.protocol, 'lockhub.v1');
    assert.deepEqual(ws.sent[0], { type: 'auth', token: 'token' });
    assert.equal(client.state.state, 'open');
    assert.equal(client.me?.oid, ADA.oid);
    client.close();
  });

  it('gives a silent socket up 10 s after its auth and reconnects', async () => {
    const clock = new FakeClock();
    /** @type {FakeSocket[]} */
    const sockets = [];
    const { connect } = await import('../core.js');
    const client = connect({
      url: 'ws://hub.test/ws', getToken: () => 'token', clock, onError: () => {},
      createSocket: (u, p) => { const s = new FakeSocket(u, p); sockets.push(s); return s; },
    });
    await settle();
    sockets[0].open();
    await clock.advance(9999);
    assert.equal(sockets[0].closedWith, null, 'given up before 10 s');
    await clock.advance(1);
    assert.equal(/** @type {{code?: number}|null} */ (sockets[0].closedWith)?.code, 4000);
    assert.equal(client.state.state, 'reconnecting');
    await clock.advance(client.state.retryInMs ?? 0);
    assert.equal(sockets.length, 2, 'no second socket after the backoff');
    client.close();
    assert.equal(clock.pending, 0, 'a timer outlived close');
  });

  it('fails a request unanswered for 15 s', async () => {
    const { client, clock, ws } = await connected();
    const p = client.request({ type: 'mine' });
    const rejected = assert.rejects(p, (err) => err instanceof LockhubError && err.code === 'timeout');
    assert.equal(ws.last('mine').type, 'mine');
    await clock.advance(15000);
    await rejected;
    client.close();
  });

  it('rejects a request answered with an error frame, with its code', async () => {
    const { client, ws } = await connected();
    const p = client.claim(TYPE, 'r-1');
    await settle();
    answer(ws, 'claim', { type: 'error', code: 'not_lockable', message: 'no' });
    await assert.rejects(p, (err) => err instanceof LockhubError && err.code === 'not_lockable');
    client.close();
  });

  it('claims again after a reconnect what it held', async () => {
    const { client, clock, sockets, ws } = await connected();
    const p = client.claim(TYPE, 'r-1');
    await settle();
    answer(ws, 'claim', { type: 'result', outcome: 'acquired', lock: lockOf('r-1', ADA, clock) });
    assert.equal((await p).outcome, 'acquired');
    ws.drop(1006);
    await clock.advance(client.state.retryInMs ?? 0);
    const ws2 = sockets[1];
    ws2.open();
    welcome(ws2, ADA, clock);
    await settle();
    assert.equal(ws2.last('claim')?.entityUid, 'r-1');
    client.close();
  });
});

describe('holds and the waiting line (PROTOCOL.md §11)', () => {
  /** A hold of r-1 that Grace holds, seen by Ada. */
  async function blocked(opts = {}) {
    const env = await connected(ADA, opts);
    /** @type {import('../core.js').HoldState[]} */
    const states = [];
    const hold = env.client.hold(TYPE, 'r-1', (s) => states.push(s));
    const view = env.client.view(TYPE, 'r-1', { intent: 'edit' });
    await settle();
    answer(env.ws, 'claim', { type: 'result', outcome: 'locked', lock: lockOf('r-1', GRACE, env.clock) });
    await settle();
    assert.equal(hold.state.status, 'locked');
    return { ...env, hold, view, states };
  }

  it('views with intent edit, and a look goes as a plain view', async () => {
    const { client, ws, view } = await blocked();
    assert.equal(ws.last('view').intent, 'edit');
    view.setIntent('look');
    assert.equal(ws.last('view').intent, undefined);
    assert.equal(ws.frames('view').length, 2);
    view.setIntent('look');
    assert.equal(ws.frames('view').length, 2, 'an unchanged intent was sent again');
    client.close();
  });

  it('the strongest intent of two views of one entity is the one sent', async () => {
    const { client, ws } = await connected();
    const look = client.view(TYPE, 'r-2', { intent: 'look' });
    const edit = client.view(TYPE, 'r-2', { intent: 'edit' });
    assert.equal(ws.last('view').intent, 'edit');
    edit.close();
    assert.equal(ws.last('view').intent, undefined, 'closing the edit view left the intent at edit');
    look.close();
    assert.equal(ws.last('unview').entityUid, 'r-2');
    client.close();
  });

  it('a lock of mine released by someone else ends the hold, their name cleaned (§6)', async () => {
    for (const [name, want] of [['\u2028 Root\u2029 Admin ', 'Root Admin'], ['\u3164', 'u-root'], [undefined, 'u-root']]) {
      const { client, clock, ws } = await connected(ADA);
      const hold = client.hold(TYPE, 'r-7', () => {});
      await settle();
      answer(ws, 'claim', { type: 'result', outcome: 'acquired', lock: lockOf('r-7', ADA, clock) });
      await settle();
      assert.equal(hold.state.status, 'held');
      ws.receive({ type: 'lock', op: 'Released', lock: lockOf('r-7', ADA, clock), by: { oid: 'u-root', name }, at: new Date(clock.now()).toISOString() });
      await settle();
      assert.equal(hold.state.status, 'ended');
      assert.deepEqual(hold.state.takenBy, { oid: 'u-root', name: want }, `by the name ${JSON.stringify(name)}`);
      client.close();
    }
  });

  it('does not claim on Released while it waits in line; takes the handoff without a claim', async () => {
    const { client, clock, ws, hold, view } = await blocked();
    ws.receive({
      type: 'presence', entityType: TYPE, entityUid: 'r-1', viewers: [
        { oid: GRACE.oid, name: GRACE.name, since: '2026-12-04T09:00:00Z', state: 'editing' },
        { oid: EDSGER.oid, name: EDSGER.name, since: '2026-12-04T09:01:00Z', state: 'waiting', position: 1 },
        { oid: ADA.oid, name: ADA.name, since: '2026-12-04T09:02:00Z', state: 'waiting', position: 2 },
      ],
    });
    assert.equal(view.position, 2);
    const claims = ws.frames('claim').length;
    ws.receive({ type: 'lock', op: 'Released', lock: lockOf('r-1', GRACE, clock), at: new Date(clock.now()).toISOString() });
    await clock.advance(1000);
    assert.equal(ws.frames('claim').length, claims, 'claimed on Released while someone was ahead');
    assert.equal(hold.state.status, 'locked');
    // Edsger got it; Ada is next.
    ws.receive({ type: 'lock', op: 'Acquired', lock: lockOf('r-1', EDSGER, clock) });
    ws.receive({
      type: 'presence', entityType: TYPE, entityUid: 'r-1', viewers: [
        { oid: EDSGER.oid, name: EDSGER.name, since: '2026-12-04T09:01:00Z', state: 'editing' },
        { oid: ADA.oid, name: ADA.name, since: '2026-12-04T09:02:00Z', state: 'waiting', position: 1 },
      ],
    });
    assert.equal(view.position, 1);
    ws.receive({ type: 'lock', op: 'Released', lock: lockOf('r-1', EDSGER, clock) });
    await settle();
    assert.equal(ws.frames('claim').length, claims, 'claimed on Released while first in line: the hub hands it over');
    // Watchers hear the hand-off's Acquired, which may come before the handoff frame.
    ws.receive({ type: 'lock', op: 'Acquired', lock: lockOf('r-1', ADA, clock) });
    await settle();
    assert.equal(ws.frames('claim').length, claims, "claimed on the hand-off's Acquired");
    ws.receive({ type: 'handoff', entityType: TYPE, entityUid: 'r-1', lock: lockOf('r-1', ADA, clock) });
    assert.equal(hold.state.status, 'held');
    assert.equal(hold.state.lock?.holderOid, ADA.oid);
    assert.equal(ws.frames('claim').length, claims, 'claimed after the handoff');
    assert.deepEqual(client.held().map((l) => l.entityUid), ['r-1']);
    // A handed-off lock is renewed like any held lock.
    await clock.advance(120000);
    assert.equal(ws.last('renew')?.entityUid, 'r-1');
    client.close();
  });

  it('claims on Released as before when the hub says nothing of a line (version 2)', async () => {
    const { client, clock, ws } = await blocked();
    ws.receive({ type: 'presence', entityType: TYPE, entityUid: 'r-1', viewers: [
      { oid: GRACE.oid, name: GRACE.name, since: '2026-12-04T09:00:00Z' },
      { oid: ADA.oid, name: ADA.name, since: '2026-12-04T09:02:00Z' },
    ] });
    const claims = ws.frames('claim').length;
    ws.receive({ type: 'lock', op: 'Released', lock: lockOf('r-1', GRACE, clock) });
    await settle();
    assert.equal(ws.frames('claim').length, claims + 1);
    client.close();
  });

  it('a person who stopped waiting does not claim when the lock is freed, and claims when they want it', async () => {
    const { client, clock, ws, hold, view } = await blocked();
    view.setIntent('look');
    ws.receive({ id: ws.last('view').id, type: 'presence', entityType: TYPE, entityUid: 'r-1', viewers: [
      { oid: GRACE.oid, name: GRACE.name, since: '2026-12-04T09:00:00Z', state: 'editing' },
      { oid: ADA.oid, name: ADA.name, since: '2026-12-04T09:02:00Z', state: 'looking' },
    ] });
    const claims = ws.frames('claim').length;
    ws.receive({ type: 'lock', op: 'Released', lock: lockOf('r-1', GRACE, clock) });
    await settle();
    assert.equal(ws.frames('claim').length, claims, 'claimed while only looking');
    assert.equal(hold.state.status, 'free');
    hold.claim();
    assert.equal(ws.frames('claim').length, claims + 1);
    client.close();
  });

  it('ignores a handoff of another person or of an entity it does not hold', async () => {
    const { client, clock, ws, hold } = await blocked();
    ws.receive({ type: 'handoff', entityType: TYPE, entityUid: 'r-1', lock: lockOf('r-1', EDSGER, clock) });
    ws.receive({ type: 'handoff', entityType: TYPE, entityUid: 'r-9', lock: lockOf('r-9', ADA, clock) });
    assert.equal(hold.state.status, 'locked');
    client.close();
  });

  it('a release answered pending says releasing until the hub says it went (PROTOCOL.md §4)', async () => {
    const { client, clock, ws } = await connected();
    const hold = client.hold(TYPE, 'r-1');
    await settle();
    answer(ws, 'claim', { type: 'result', outcome: 'acquired', lock: lockOf('r-1', ADA, clock) });
    await settle();
    const p = hold.release();
    assert.equal(hold.state.status, 'releasing');
    answer(ws, 'release', { type: 'result', outcome: 'released', pending: true });
    assert.equal((await p).pending, true);
    assert.equal(hold.state.status, 'releasing');
    ws.receive({ type: 'lock', op: 'Released', lock: lockOf('r-1', ADA, clock) });
    assert.equal(hold.state.status, 'released');
    const claims = ws.frames('claim').length;
    await clock.advance(5000);
    assert.equal(ws.frames('claim').length, claims, 'claimed back after its own release');
    client.close();
  });

  it('a pending release whose lock lives on with another tab of mine ends as released here', async () => {
    for (const how of ['Renewed', 'time']) {
      const { client, clock, ws } = await connected();
      const hold = client.hold(TYPE, 'r-1');
      await settle();
      answer(ws, 'claim', { type: 'result', outcome: 'acquired', lock: lockOf('r-1', ADA, clock) });
      await settle();
      const p = hold.release();
      answer(ws, 'release', { type: 'result', outcome: 'released', pending: true });
      await p;
      if (how === 'Renewed') {
        ws.receive({ type: 'lock', op: 'Renewed', lock: lockOf('r-1', ADA, clock) });
      } else {
        await clock.advance(44000);
        assert.equal(hold.state.status, 'releasing', 'gave up before the contract bound');
        await clock.advance(1500);
      }
      assert.equal(hold.state.status, 'released', how);
      assert.equal(hold.state.note, 'elsewhere', how);
      client.close();
    }
  });

  it('a release answered without pending is released at once', async () => {
    const { client, clock, ws } = await connected();
    const hold = client.hold(TYPE, 'r-1');
    await settle();
    answer(ws, 'claim', { type: 'result', outcome: 'acquired', lock: lockOf('r-1', ADA, clock) });
    await settle();
    const p = hold.release();
    answer(ws, 'release', { type: 'result', outcome: 'released' });
    await p;
    assert.equal(hold.state.status, 'released');
    client.close();
  });
});

describe('claims of many (PROTOCOL.md §12)', () => {
  it('claimMany sends one frame and holds every lock it got', async () => {
    const { client, clock, ws } = await connected();
    const p = client.claimMany(TYPE, ['r-1', 'r-2']);
    await settle();
    const f = answer(ws, 'claimMany', { type: 'result', outcome: 'acquired', locks: [lockOf('r-1', ADA, clock), lockOf('r-2', ADA, clock)] });
    assert.deepEqual(f.entityUids, ['r-1', 'r-2']);
    assert.equal(f.entityType, TYPE);
    assert.equal((await p).outcome, 'acquired');
    assert.deepEqual(client.held().map((l) => l.entityUid).sort(), ['r-1', 'r-2']);
    await clock.advance(120000);
    assert.deepEqual(ws.frames('renew').map((r) => r.entityUid).sort(), ['r-1', 'r-2']);
    const r = client.releaseMany(TYPE, ['r-1', 'r-2']);
    answer(ws, 'releaseMany', { type: 'result', outcome: 'released', count: 2 });
    assert.equal((await r).count, 2);
    assert.deepEqual(client.held(), []);
    client.close();
  });

  it('claimMany answered locked holds nothing and names the holders', async () => {
    const { client, clock, ws } = await connected();
    const p = client.claimMany(TYPE, ['r-1', 'r-2']);
    await settle();
    answer(ws, 'claimMany', { type: 'result', outcome: 'locked', locks: [lockOf('r-2', GRACE, clock)] });
    const r = await p;
    assert.equal(r.outcome, 'locked');
    assert.equal(r.locks?.[0].holderName, GRACE.name);
    assert.deepEqual(client.held(), []);
    client.close();
  });

  it('refuses an empty list or a uid that is not a string', async () => {
    const { client } = await connected();
    await assert.rejects(client.claimMany(TYPE, []), TypeError);
    await assert.rejects(client.claimMany(TYPE, /** @type {any} */ (['r-1', 7])), TypeError);
    client.close();
  });
});
