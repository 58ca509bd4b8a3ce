// @ts-check
/**
 * The tenant's audit trail over HTTP (PROTOCOL.md §10, `GET /api/admin/audit`): what
 * {@link LockClient#audit} and the lock console read. No DOM; `fetch` is injectable.
 *
 * @module lockhub/audit
 */

import { LockhubError } from './protocol.js';

/**
 * An entry of the audit trail (PROTOCOL.md §10).
 * @typedef {object} AuditEntry
 * @property {string} id
 * @property {'Acquired'|'Released'|'TakenOver'|'Expired'|'ForceReleased'} op
 * @property {string} entityType
 * @property {string} entityUid
 * @property {import('./protocol.js').Holder|null} holder
 * @property {import('./protocol.js').Holder|null} [previous]  TakenOver and ForceReleased: whose lock it was (version 3)
 * @property {import('./protocol.js').Holder|null} actor
 * @property {string} reason  claim, release, takeover, expiry, disconnect, decision, admin, foreign
 * @property {string} at
 */

/**
 * A page of the audit trail.
 * @typedef {object} AuditPage
 * @property {AuditEntry[]} entries
 * @property {string|null} next  the cursor of the next, older page
 */

/**
 * @typedef {object} AuditQuery
 * @property {string} [entityType]
 * @property {string} [entityUid]
 * @property {string|null} [before]
 * @property {number} [limit]
 */

/**
 * Reads a page of the audit trail from the hub whose socket URL is wsURL.
 * @param {string} wsURL  the hub's WebSocket URL (its origin is the API's)
 * @param {string} token
 * @param {AuditQuery} query
 * @param {typeof fetch} fetchFn
 * @returns {Promise<AuditPage>}
 */
export async function fetchAudit(wsURL, token, query, fetchFn) {
  const u = new URL('/api/admin/audit', wsURL.replace(/^ws/, 'http'));
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, String(v));
  }
  const res = await fetchFn(u, { headers: { Authorization: `Bearer ${token}` }, cache: 'no-store' });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new LockhubError(body.code || `http_${res.status}`, body.message || res.statusText);
  return body;
}
