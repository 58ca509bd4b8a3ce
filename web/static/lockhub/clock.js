// @ts-check
/**
 * The clock and the timers of a client, injectable so that its tests drive time
 * instead of waiting for it (ConnectOptions.clock). The default is the page's own.
 *
 * @module lockhub/clock
 */

/**
 * A timer's handle, whatever the clock's timers return.
 * @typedef {unknown} TimerHandle
 */

/**
 * What a client reads the time from and sets its timers with.
 * @typedef {object} Clock
 * @property {() => number} now  Unix ms (as Date.now)
 * @property {(fn: () => void, ms: number) => TimerHandle} setTimeout
 * @property {(handle: TimerHandle) => void} clearTimeout
 * @property {(fn: () => void, ms: number) => TimerHandle} setInterval
 * @property {(handle: TimerHandle) => void} clearInterval
 */

/**
 * The page's clock and timers.
 * @type {Clock}
 */
export const systemClock = Object.freeze({
  now: () => Date.now(),
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (h) => globalThis.clearTimeout(/** @type {any} */ (h)),
  setInterval: (fn, ms) => globalThis.setInterval(fn, ms),
  clearInterval: (h) => globalThis.clearInterval(/** @type {any} */ (h)),
});
