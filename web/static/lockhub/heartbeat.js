// @ts-check
/**
 * The liveness check of one socket (PROTOCOL.md §4, Heartbeat). A half-open connection
 * (a peer gone without a FIN: a laptop that slept, a NAT that forgot the flow) looks
 * open to the browser for minutes, so the client asks: when the hub has said nothing
 * for `idleMs` it pings, and when nothing at all arrives within `answerMs` of a frame
 * the hub must answer, the socket is dead. Any frame counts as an answer, a `pong` or
 * an `error` of a hub that does not know `ping` alike.
 *
 * Internal to the client: {@link LockClient} makes one {@link Heartbeat} per socket and
 * stops it when the socket ends.
 *
 * @module lockhub/heartbeat
 */

/** @typedef {import('./connection.js').LockClient} LockClient */
/** @typedef {import('./clock.js').Clock} Clock */
/** @typedef {import('./clock.js').TimerHandle} TimerHandle */

/**
 * @typedef {object} HeartbeatOptions
 * @property {number} idleMs    ping after this long without a frame from the hub
 * @property {number} answerMs  the socket is dead when no frame arrives this long after a ping
 * @property {() => void} ping  sends the ping
 * @property {() => void} dead  the hub did not answer in time (called once; the heartbeat stops first)
 * @property {Clock} clock
 */

/**
 * The heartbeat of one socket: one timer, armed for the next moment something is due
 * (never a timer per frame), cleared by {@link Heartbeat#stop}.
 */
export class Heartbeat {
  /** @type {HeartbeatOptions} */
  #o;
  /** clock.now() of the last frame from the hub. */
  #lastHeard = -Infinity;
  #pinging = false;
  #stopped = false;
  /** @type {TimerHandle|undefined} */
  #timer;

  /** @param {HeartbeatOptions} o */
  constructor(o) {
    this.#o = o;
  }

  /** A frame arrived from the hub. */
  heard() {
    this.#lastHeard = this.#o.clock.now();
  }

  /**
   * A frame the hub answers went out (the first `auth`): the socket is dead unless some
   * frame arrives within `answerMs`.
   */
  expectAnswer() {
    if (this.#stopped) return;
    const since = this.#o.clock.now();
    this.#o.clock.clearTimeout(this.#timer);
    this.#timer = this.#o.clock.setTimeout(() => {
      this.#timer = undefined;
      if (this.#lastHeard >= since) {
        this.#schedule();
      } else {
        this.stop();
        this.#o.dead();
      }
    }, this.#o.answerMs);
  }

  /**
   * The hub answered the `auth` (welcome): from now on ping after `idleMs` of silence.
   * (Before authentication any frame but `auth` closes the socket, PROTOCOL.md §4.)
   */
  pingWhenIdle() {
    if (this.#stopped) return;
    this.#pinging = true;
    this.#o.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#schedule();
  }

  /** Clears the timer for good: the socket ended. */
  stop() {
    this.#stopped = true;
    this.#o.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule() {
    if (this.#stopped || !this.#pinging) return;
    const left = this.#lastHeard + this.#o.idleMs - this.#o.clock.now();
    if (left > 0) {
      this.#timer = this.#o.clock.setTimeout(() => {
        this.#timer = undefined;
        this.#schedule();
      }, left);
      return;
    }
    this.#o.ping();
    this.expectAnswer();
  }
}
