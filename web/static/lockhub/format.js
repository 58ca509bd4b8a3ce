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

/**
 * The banner text of a form held by someone else.
 * @param {Lock} lock
 * @returns {string}
 */
export function lockedByText(lock) {
  return `Locked by ${lock.holderName} since ${formatClock(lock.acquiredAtUtc)} (until ${formatClock(lock.expiresAtUtc)})`;
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
