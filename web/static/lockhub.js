// @ts-check
/**
 * lockhub.js: the browser client of lockhub edit locks (PROTOCOL.md §3 and §4).
 *
 * ES modules with no dependencies and no build step. This file is the public entry;
 * the parts live in lockhub/ next to it and are imported from here. Start with
 * {@link connect}:
 *
 *     <link rel="stylesheet" href="/static/lockhub.css">
 *
 *     import { connect } from '/static/lockhub.js';
 *     const client = connect({ getToken: () => fetchToken() });
 *     client.onStateChange((s) => indicator.dataset.state = s.state);
 *     const grid = client.lockGrid(table, 'ApprovalRequest', 'data-uid');
 *     const form = client.lockForm(formEl, 'ApprovalRequest', 'r-1001');
 *     ...
 *     form.close();   // releases the lock
 *
 * Presence (PROTOCOL.md §9): a lockForm views its entity while it is open and lists
 * the others ("Grace Hopper is waiting"); someone blocked by the lock gets "Ask Ada
 * Lovelace to finish" (`form.nudge()`), the holder a notice naming who asks.
 * `form.others`, `form.viewers`, the `onPresence` and `onNudge` options, and
 * `client.view(type, uid, {onPresence, onNudge})` give the same to a page's own UI.
 *
 * The client keeps one WebSocket to `/ws` (subprotocol `lockhub.v1`). It authenticates
 * with the first frame, refreshes the token in band 30 s before it expires, and
 * reconnects with exponential backoff and full jitter, except after 4403 (forbidden).
 * It sends a `ping` when it has heard nothing from the hub for 25 s, and gives a socket
 * up (close 4000) when no frame at all arrives within 10 s of a `ping` or of its first
 * `auth`, so a half-open connection is found within about 35 s (PROTOCOL.md §4).
 * After a reconnect it authenticates again, watches again (the snapshot makes every
 * map whole), claims again what it held and views again what it viewed. Held locks are renewed every `renewMs` of
 * the welcome, and at once when an event shows the lease ending before the next
 * renewal (another tab of the same person closed). On `pagehide` held locks are
 * released over the socket; the hub's release grace covers a tab that dies.
 *
 * Everything runs on the page's one thread; no method blocks. Callbacks are called
 * synchronously from socket and timer events and must not throw (a throwing callback
 * is reported to the console and does not break the client).
 *
 * Styles: the client injects none, so it runs under a Content-Security-Policy without
 * `'unsafe-inline'` (PROTOCOL.md §5, Hardening). It sets classes and attributes
 * (`lockhub-banner`, `lockhub-locked`, `lockhub-mine`, `lockhub-presence`, `data-kind`,
 * `data-lock-state`, `data-activity`, `inert`, `hidden`), and lockhub.css, next to this file, styles them; a page links it,
 * or styles the same classes itself. (The `styles` option of earlier versions, which
 * injected a `<style>` element, is gone; it is ignored when given.)
 *
 * Entry points (the exports map of lockhub/package.json, `@lockhub/client`):
 *
 * - `lockhub/core.js`: the headless core, no DOM (also under Node).
 * - `lockhub/dom.js`: the widgets, and a `connect` whose client makes them; this file
 *   re-exports it.
 * - `lockhub/react.js`: React hooks over the core.
 *
 * Modules, each importable on its own:
 *
 * - `lockhub/connection.js`: {@link LockClient} and {@link connect}: the socket,
 *   auth and refresh, reconnect, requests.
 * - `lockhub/watches.js`: the live map of each watched type (internal; its
 *   {@link Watch} is what {@link LockClient#watch} returns).
 * - `lockhub/holds.js`: the state machine of each lock the client wants to hold
 *   (internal).
 * - `lockhub/presence.js`: the entities the client views and who else views each,
 *   PROTOCOL.md §9 (internal; its {@link View} is what {@link LockClient#view} returns).
 * - `lockhub/heartbeat.js`: the liveness check of a socket (internal).
 * - `lockhub/requests.js`, `lockhub/refresh.js`, `lockhub/lifecycle.js`: requests matched
 *   to answers by id, the token's in-band refresh, the page's lifecycle (internal).
 * - `lockhub/clock.js`, `lockhub/audit.js`, `lockhub/messages.js`: the injectable clock,
 *   the audit trail over HTTP, every text a widget shows.
 * - `lockhub/form.js`: {@link LockForm}. `lockhub/grid.js`: {@link LockGrid}.
 * - `lockhub/console.js`: {@link LockConsole}, the lock console of an administrator
 *   (`client.lockConsole(element)`): every live lock of the tenant, Force release, an
 *   entity's audit trail.
 * - `lockhub/protocol.js`: the subprotocol, close codes, frame shapes and
 *   {@link LockhubError}.
 * - `lockhub/format.js`, `lockhub/token.js`, `lockhub/backoff.js`, `lockhub/callback.js`:
 *   the pure helpers.
 *
 * @module lockhub
 */

// The whole client: the headless core (lockhub/core.js) and the DOM widgets
// (lockhub/dom.js), whose connect makes a client with lockForm, lockGrid and lockConsole.
export * from './lockhub/dom.js';

// The types of the public API, so that `import('/static/lockhub.js').Lock` and the like
// keep naming them.
/** @typedef {import('./lockhub/protocol.js').Lock} Lock */
/** @typedef {import('./lockhub/protocol.js').Holder} Holder */
/** @typedef {import('./lockhub/protocol.js').Welcome} Welcome */
/** @typedef {import('./lockhub/protocol.js').Result} Result */
/** @typedef {import('./lockhub/protocol.js').Change} Change */
/** @typedef {import('./lockhub/connection.js').ConnectOptions} ConnectOptions */
/** @typedef {import('./lockhub/connection.js').TokenRequest} TokenRequest */
/** @typedef {import('./lockhub/connection.js').ConnectionState} ConnectionState */
/** @typedef {import('./lockhub/connection.js').ConnectionStateName} ConnectionStateName */
/** @typedef {import('./lockhub/watches.js').Watch} Watch */
/** @typedef {import('./lockhub/form.js').LockFormOptions} LockFormOptions */
/** @typedef {import('./lockhub/holds.js').Hold} Hold */
/** @typedef {import('./lockhub/holds.js').HoldState} HoldState */
/** @typedef {import('./lockhub/messages.js').Messages} Messages */
/** @typedef {import('./lockhub/protocol.js').Intent} Intent */
/** @typedef {import('./lockhub/form.js').FormState} FormState */
/** @typedef {import('./lockhub/grid.js').LockGridOptions} LockGridOptions */
/** @typedef {import('./lockhub/protocol.js').Viewer} Viewer */
/** @typedef {import('./lockhub/protocol.js').Nudge} Nudge */
/** @typedef {import('./lockhub/presence.js').View} View */
/** @typedef {import('./lockhub/presence.js').ViewListener} ViewListener */
/** @typedef {import('./lockhub/presence.js').ViewStatus} ViewStatus */
/** @typedef {import('./lockhub/form.js').OtherViewer} OtherViewer */
/** @typedef {import('./lockhub/form.js').NudgeOutcome} NudgeOutcome */
/** @typedef {import('./lockhub/console.js').LockConsoleOptions} LockConsoleOptions */
/** @typedef {import('./lockhub/audit.js').AuditEntry} AuditEntry */
/** @typedef {import('./lockhub/audit.js').AuditPage} AuditPage */
