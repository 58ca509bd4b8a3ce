// @ts-check
/**
 * What the demo page says: amounts, a request's status, and an API answer that went
 * wrong. Pure functions.
 */
import { lockedByText } from '/static/lockhub.js';

/**
 * An amount in its currency, as the office reads it.
 * @param {number} n @param {string} c
 * @returns {string}
 */
export function money(n, c) {
  try {
    return new Intl.NumberFormat('en-GB', { style: 'currency', currency: c || 'EUR' }).format(n);
  } catch {
    return `${n} ${c}`;
  }
}

/**
 * A request's status, and who decided it.
 * @param {import('./session.js').Row} r
 * @returns {string}
 */
export function statusText(r) {
  if (r.status === 'approved') return `Approved${r.decidedBy ? ` by ${r.decidedBy.name}` : ''}`;
  if (r.status === 'rejected') return `Rejected${r.decidedBy ? ` by ${r.decidedBy.name}` : ''}`;
  return 'Pending';
}

/**
 * What went wrong with a call of the API, for the user (PROTOCOL.md §5: 409 locked,
 * already_decided; 412 stale; 503 store_unavailable).
 * @param {{status: number, data: any}} res
 * @returns {string}
 */
export function errorText(res) {
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
