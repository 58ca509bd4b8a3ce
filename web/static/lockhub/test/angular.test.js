// @ts-check
// The Angular service example of the README (examples/angular/lock.service.js) on the
// fake socket and clock: what a component subscribed to lock$ sees, and that
// unsubscribing and destroying leave nothing behind.
import assert from 'node:assert/strict';
import { it } from 'node:test';

import { LockService } from '../examples/angular/lock.service.js';
import { ADA, FakeClock, FakeSocket, GRACE, TYPE, lockOf, settle, welcome } from './fake.js';

it('lock$ holds while subscribed, shows the line and the handoff, and lets go on unsubscribe', async () => {
  const clock = new FakeClock();
  /** @type {FakeSocket[]} */
  const sockets = [];
  const svc = new LockService({
    url: 'ws://hub.test/ws', getToken: () => 'token', clock, onError: () => {},
    createSocket: (u, p) => { const s = new FakeSocket(u, p); sockets.push(s); return s; },
  });
  /** @type {string[]} */
  const states = [];
  const stateSub = svc.state$.subscribe((s) => states.push(s.state));
  await settle();
  const ws = sockets[0];
  ws.open();
  welcome(ws, ADA, clock);
  await settle();
  assert.deepEqual(states, ['connecting', 'open']);

  /** @type {import('../examples/angular/lock.service.js').LockView[]} */
  const seen = [];
  const lock$ = svc.lock$(TYPE, 'r-1');
  const sub = lock$.subscribe({ next: (v) => seen.push(v) });
  await settle();
  const claim = ws.last('claim');
  assert.equal(ws.last('view').intent, 'edit');
  ws.receive({ id: claim.id, type: 'result', outcome: 'locked', lock: lockOf('r-1', GRACE, clock) });
  ws.receive({ id: ws.last('view').id, type: 'presence', entityType: TYPE, entityUid: 'r-1', viewers: [
    { oid: GRACE.oid, name: GRACE.name, since: '2026-12-04T09:00:00Z', state: 'editing' },
    { oid: ADA.oid, name: ADA.name, since: '2026-12-04T09:01:00Z', state: 'waiting', position: 1 },
  ] });
  await settle();
  let last = seen[seen.length - 1];
  assert.equal(last.status, 'locked');
  assert.equal(last.holder?.name, GRACE.name);
  assert.equal(last.position, 1);
  assert.deepEqual(last.others.map((o) => o.oid), [GRACE.oid]);

  ws.receive({ type: 'lock', op: 'Released', lock: lockOf('r-1', GRACE, clock) });
  ws.receive({ type: 'handoff', entityType: TYPE, entityUid: 'r-1', lock: lockOf('r-1', ADA, clock) });
  last = seen[seen.length - 1];
  assert.equal(last.status, 'held');
  assert.equal(last.holder?.oid, ADA.oid);
  assert.equal(ws.frames('claim').length, 1, 'the service claimed besides the handoff');

  lock$.stopWaiting();
  assert.equal(ws.last('view').intent, undefined);

  sub.unsubscribe();
  assert.equal(ws.last('release')?.entityUid, 'r-1');
  assert.equal(ws.last('unview')?.entityUid, 'r-1');
  stateSub.unsubscribe();
  svc.ngOnDestroy();
  assert.equal(clock.pending, 0, 'a timer outlived ngOnDestroy');
});
