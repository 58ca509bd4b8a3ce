// @ts-check
/**
 * Times as the hub and the .NET service write them, and as the user reads them.
 *
 * @module lockhub/format
 */

/** @typedef {import('./protocol.js').Lock} Lock */

/**
 * Parses an RFC 3339 time as the hub or the .NET service writes it (0 to 9 fractional
 * digits, `Z` or an offset) into Unix milliseconds; NaN when it is not one.
 * @param {string} s
 * @returns {number}
 */
export function parseTime(s) {
  if (typeof s !== 'string') return NaN;
  // Date.parse is only specified for 3 fractional digits; cut the rest.
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/i.exec(s.trim());
  if (!m) return NaN;
  const frac = (m[2] || '').slice(0, 3).padEnd(3, '0');
  return Date.parse(`${m[1]}.${frac}${m[3].toUpperCase()}`);
}

/**
 * Formats a time as the user's local HH:MM (24-hour clock).
 * @param {string|number|Date} t  RFC 3339 string, Unix ms or Date
 * @returns {string}
 */
export function formatClock(t) {
  const ms = typeof t === 'string' ? parseTime(t) : +t;
  if (!Number.isFinite(ms)) return '';
  const d = new Date(ms);
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
}

/**
 * Formats a duration as `4:05` (minutes:seconds) or `1:02:03`; never negative.
 * @param {number} ms
 * @returns {string}
 */
export function formatRemaining(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

/** The most characters (code points) a cleaned name keeps (PROTOCOL.md §6). */
export const MAX_NAME_LENGTH = 200;

// Control and format characters (Cc, Cf: bidirectional overrides, zero-width joiners),
// line and paragraph separators (Zl, Zp), the invisible Hangul filler letters, and
// lone surrogates (which the hub's UTF-8 would have made U+FFFD).
const REMOVED = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0]/gu;
const LONE_SURROGATE = /[\uD800-\uDFFF]/gu;

/**
 * A person's name as the page shows it, cleaned as PROTOCOL.md §6 "Names" says and
 * as the hub cleans the names of tokens (hub/auth CleanName): without control, format,
 * line and paragraph separator characters and the invisible filler letters (U+115F,
 * U+1160, U+3164, U+FFA0), surrounding white space trimmed, cut to 200 characters.
 * Names other programs wrote to Redis (§8) reach the page uncleaned, so every name
 * shown goes through this. A name left empty, or not a string, is `fallback` (the
 * oid).
 * @param {unknown} name
 * @param {string} [fallback]
 * @returns {string}
 */
export function cleanName(name, fallback = '') {
  if (typeof name !== 'string') return fallback;
  let s = name.replace(LONE_SURROGATE, '\uFFFD').replace(REMOVED, '').trim();
  const chars = Array.from(s);
  if (chars.length > MAX_NAME_LENGTH) s = chars.slice(0, MAX_NAME_LENGTH).join('').trimEnd();
  return s || fallback;
}

/**
 * The cleaned name of a lock's holder (cleanName), its oid when that leaves nothing.
 * @param {{holderName?: string, holderOid?: string}} lock
 * @returns {string}
 */
export function holderNameOf(lock) {
  return cleanName(lock.holderName, lock.holderOid || '');
}

/**
 * The banner text of a form held by someone else.
 * @param {Lock} lock
 * @returns {string}
 */
export function lockedByText(lock) {
  return `Locked by ${holderNameOf(lock)} since ${formatClock(lock.acquiredAtUtc)} (until ${formatClock(lock.expiresAtUtc)})`;
}

/**
 * What a viewer of an entity is doing, as a form shows it (PROTOCOL.md §9, "whether a
 * viewer is editing follows from the lock"): the holder is `editing`; while someone
 * holds the lock every other viewer is `waiting` (their form is blocked and takes the
 * lock when it is free); while nobody holds it (free, or locks unavailable) they are
 * `viewing`.
 * @param {string} oid  the viewer
 * @param {string|null|undefined} holderOid  who holds the lock, if anyone is known to
 * @returns {'editing'|'waiting'|'viewing'}
 */
export function activityOf(oid, holderOid) {
  if (!holderOid) return 'viewing';
  return oid === holderOid ? 'editing' : 'waiting';
}

/**
 * The line of a form about one other viewer: "Grace Hopper is waiting".
 * @param {string} name
 * @param {'editing'|'waiting'|'viewing'} activity
 * @returns {string}
 */
export function viewerText(name, activity) {
  return `${name} is ${activity}`;
}

/**
 * The holder's notice of a nudge: "Grace Hopper asks you to finish (10:02)".
 * @param {string} name  who asks
 * @param {string} at    when, RFC 3339
 * @returns {string}
 */
export function nudgeText(name, at) {
  const clock = formatClock(at);
  return clock ? `${name} asks you to finish (${clock})` : `${name} asks you to finish`;
}
