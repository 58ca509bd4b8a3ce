// @ts-check
/**
 * The reconnect delay of the client.
 *
 * @module lockhub/backoff
 */

/**
 * The reconnect delay of attempt `attempt` (0-based): exponential backoff with full
 * jitter, a uniform random delay in [0, min(maxMs, baseMs·2^attempt)).
 * (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015.)
 * @param {number} attempt
 * @param {number} [baseMs]
 * @param {number} [maxMs]
 * @param {() => number} [random]
 * @returns {number}
 */
export function backoffDelay(attempt, baseMs = 500, maxMs = 10000, random = Math.random) {
  const cap = Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(attempt, 0), 30));
  return Math.floor(random() * cap);
}
