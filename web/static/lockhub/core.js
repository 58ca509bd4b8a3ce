// @ts-check
/**
 * The headless core of the lockhub client (`@lockhub/client`): the connection, holds,
 * watches, presence and the waiting line, bulk claims, the console's data and the audit
 * trail, with no DOM. What the DOM widgets (`dom.js`), the React bindings (`react.js`)
 * and a page's own UI are built on. Runs in a browser and, with an injected socket
 * (`createSocket`), under Node.
 *
 *     import { connect } from '@lockhub/client';   // or '/static/lockhub/core.js'
 *     const client = connect({ getToken, url: 'wss://locks.example.com/ws' });
 *     const hold = client.hold('ApprovalRequest', 'r-1001', (s) => render(s.status));
 *     const view = client.view('ApprovalRequest', 'r-1001', { intent: 'edit', onPresence });
 *     ...
 *     hold.drop(); view.close();
 *
 * @module lockhub/core
 */

export { LockClient, connect } from './connection.js';
export { SUBPROTOCOL, CloseCode, LockhubError } from './protocol.js';
export { backoffDelay } from './backoff.js';
export { jwtExpiry } from './token.js';
export { systemClock } from './clock.js';
export { fetchAudit } from './audit.js';
export { en, de, messagesOf } from './messages.js';
export {
  parseTime, formatClock, formatRemaining, lockedByText, activityOf, viewerText, nudgeText, cleanName, holderNameOf,
  MAX_NAME_LENGTH,
} from './format.js';

/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Holder} Holder */
/** @typedef {import('./protocol.js').Welcome} Welcome */
/** @typedef {import('./protocol.js').Result} Result */
/** @typedef {import('./protocol.js').Change} Change */
/** @typedef {import('./protocol.js').Viewer} Viewer */
/** @typedef {import('./protocol.js').ViewerState} ViewerState */
/** @typedef {import('./protocol.js').Intent} Intent */
/** @typedef {import('./protocol.js').Nudge} Nudge */
/** @typedef {import('./connection.js').ConnectOptions} ConnectOptions */
/** @typedef {import('./connection.js').TokenRequest} TokenRequest */
/** @typedef {import('./connection.js').ConnectionState} ConnectionState */
/** @typedef {import('./connection.js').ConnectionStateName} ConnectionStateName */
/** @typedef {import('./connection.js').SocketLike} SocketLike */
/** @typedef {import('./clock.js').Clock} Clock */
/** @typedef {import('./holds.js').Hold} Hold */
/** @typedef {import('./holds.js').HoldState} HoldState */
/** @typedef {import('./holds.js').HoldStatus} HoldStatus */
/** @typedef {import('./watches.js').Watch} Watch */
/** @typedef {import('./presence.js').View} View */
/** @typedef {import('./presence.js').ViewListener} ViewListener */
/** @typedef {import('./presence.js').ViewStatus} ViewStatus */
/** @typedef {import('./audit.js').AuditEntry} AuditEntry */
/** @typedef {import('./audit.js').AuditPage} AuditPage */
/** @typedef {import('./audit.js').AuditQuery} AuditQuery */
/** @typedef {import('./messages.js').Messages} Messages */
