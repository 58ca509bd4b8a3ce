// @ts-check
/**
 * A fake clock and a fake socket for the core's tests under `node --test`: time moves
 * only when a test advances it, and every frame the client sends is kept for the test
 * to read. The hub's side is whatever the test sends back, frame by frame, as the
 * contract (PROTOCOL.md) writes it.
 *
 * @module lockhub/test/fake
 */

import { connect } from '../core.js';

/** @typedef {import('../clock.js').Clock} Clock */
/** @typedef {import('../connection.js').ConnectOptions} ConnectOptions */

/** A clock whose time moves only by {@link FakeClock#advance}. @implements {Clock} */
export class FakeClock {
  #now;
  #seq = 0;
  /** @type {Map<number, {at: number, fn: () => void, every: number}>} */
  #timers = new Map();

  constructor(start = Date.parse('2026-12-04T10:00:00Z')) {
    this.#now = start;
  }

  now() {
    return this.#now;
  }

  /** @param {() => void} fn @param {number} ms */
  setTimeout(fn, ms) {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), fn, every: 0 });
    return id;
  }

  /** @param {unknown} id */
  clearTimeout(id) {
    this.#timers.delete(/** @type {number} */ (id));
  }

  /** @param {() => void} fn @param {number} ms */
  setInterval(fn, ms) {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#now + ms, fn, every: Math.max(1, ms) });
    return id;
  }

  /** @param {unknown} id */
  clearInterval(id) {
    this.#timers.delete(/** @type {number} */ (id));
  }

  /** Timers still set (an interval counts). */
  get pending() {
    return this.#timers.size;
  }

  /**
   * Moves time on by ms, running each timer that comes due in order, with the
   * promise jobs it starts settled before the next.
   * @param {number} ms
   */
  async advance(ms) {
    const end = this.#now + ms;
    for (;;) {
      /** @type {[number, {at: number, fn: () => void, every: number}]|null} */
      let next = null;
      for (const [id, t] of this.#timers) if (t.at <= end && (!next || t.at < next[1].at)) next = [id, t];
      if (!next) break;
      const [id, t] = next;
      this.#now = t.at;
      if (t.every) t.at += t.every;
      else this.#timers.delete(id);
      t.fn();
      await settle();
    }
    this.#now = end;
    await settle();
  }
}

/** Lets every pending promise job run. */
export function settle() {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A socket the client talks to; the test plays the hub. */
export class FakeSocket {
  readyState = 0;
  /** @type {any[]} frames the client sent, parsed */
  sent = [];
  /** @type {{code?: number, reason?: string}|null} */
  closedWith = null;
  /** Answer every `ping` with a `pong`, as a live hub does (a test of the heartbeat turns it off). */
  autoPong = true;
  /** @type {((ev: any) => void)|null} */ onopen = null;
  /** @type {((ev: {data: unknown}) => void)|null} */ onmessage = null;
  /** @type {((ev: {code: number, reason: string}) => void)|null} */ onclose = null;
  /** @type {((ev: any) => void)|null} */ onerror = null;

  /** @param {string} url @param {string} protocol */
  constructor(url, protocol) {
    this.url = url;
    this.protocol = protocol;
  }

  /** @param {string} data */
  send(data) {
    if (this.readyState !== 1) throw new Error('send on a socket that is not open');
    const f = JSON.parse(data);
    this.sent.push(f);
    if (f.type === 'ping' && this.autoPong) queueMicrotask(() => this.receive({ id: f.id, type: 'pong' }));
  }

  /** @param {number} [code] @param {string} [reason] */
  close(code, reason) {
    this.closedWith = { code, reason };
    this.readyState = 3;
  }

  // ---------------------------------------------------------------- the hub's side

  /** The handshake completed. */
  open() {
    this.readyState = 1;
    this.onopen?.({});
  }

  /** The hub sends a frame. @param {Record<string, unknown>} frame */
  receive(frame) {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }

  /** The hub (or the network) closed the socket. @param {number} code @param {string} [reason] */
  drop(code, reason = '') {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }

  /** The frames sent of a type. @param {string} type */
  frames(type) {
    return this.sent.filter((f) => f.type === type);
  }

  /** The last frame sent of a type. @param {string} type */
  last(type) {
    const all = this.frames(type);
    return all[all.length - 1];
  }
}

export const ADA = { oid: 'u-ada', name: 'Ada Lovelace' };
export const GRACE = { oid: 'u-grace', name: 'Grace Hopper' };
export const EDSGER = { oid: 'u-edsger', name: 'Edsger Dijkstra' };
export const TYPE = 'ApprovalRequest';

/**
 * A lock of PROTOCOL.md §1.
 * @param {string} uid @param {{oid: string, name: string}} who @param {FakeClock} clock
 */
export function lockOf(uid, who, clock) {
  return {
    entityType: TYPE,
    entityUid: uid,
    holderOid: who.oid,
    holderName: who.name,
    acquiredAtUtc: new Date(clock.now()).toISOString(),
    expiresAtUtc: new Date(clock.now() + 300000).toISOString(),
  };
}

/**
 * A client on a fake socket and clock, connected and welcomed as who.
 * @param {{oid: string, name: string}} [who]
 * @param {Partial<ConnectOptions>} [opts]
 */
export async function connected(who = ADA, opts = {}) {
  const clock = new FakeClock();
  /** @type {FakeSocket[]} */
  const sockets = [];
  /** @type {unknown[]} */
  const errors = [];
  const client = connect({
    url: 'ws://hub.test/ws',
    getToken: () => 'token',
    clock,
    createSocket: (url, protocol) => {
      const s = new FakeSocket(url, protocol);
      sockets.push(s);
      return s;
    },
    onError: (err) => errors.push(err),
    ...opts,
  });
  await settle();
  const ws = sockets[0];
  ws.open();
  welcome(ws, who, clock);
  await settle();
  return { client, clock, sockets, ws, errors };
}

/**
 * The hub's welcome.
 * @param {FakeSocket} ws @param {{oid: string, name: string}} who @param {FakeClock} clock
 */
export function welcome(ws, who, clock) {
  ws.receive({
    type: 'welcome', connectionId: 'c-1', tenant: 'acme', holder: who, leaseMs: 300000, renewMs: 120000,
    serverTime: new Date(clock.now()).toISOString(), lockable: [TYPE], canTakeOver: false,
  });
}

/**
 * Answers the last request of a type the client sent.
 * @param {FakeSocket} ws @param {string} type @param {Record<string, unknown>} answer
 */
export function answer(ws, type, answer) {
  const f = ws.last(type);
  if (!f) throw new Error(`the client sent no ${type}`);
  ws.receive({ id: f.id, ...answer });
  return f;
}
