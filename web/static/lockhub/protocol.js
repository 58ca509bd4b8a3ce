// @ts-check
/**
 * The wire vocabulary of PROTOCOL.md §1, §3 and §4 as the browser client sees it: the
 * subprotocol, the close codes, the shapes of the frames, and the error a request
 * rejects with. No behaviour.
 *
 * @module lockhub/protocol
 */

/** The WebSocket subprotocol of the contract. */
export const SUBPROTOCOL = 'lockhub.v1';

/**
 * Close codes of PROTOCOL.md §4, and the one the client closes with itself when the
 * hub stops answering (`NO_ANSWER`, §4 Heartbeat).
 */
export const CloseCode = Object.freeze({
  NORMAL: 1000,
  GOING_AWAY: 1001,
  TOO_LARGE: 1009,
  NO_ANSWER: 4000,
  NOT_AUTHENTICATED: 4401,
  FORBIDDEN: 4403,
  AUTH_TIMEOUT: 4408,
  TOO_MANY: 4429,
});

/**
 * The lock record of PROTOCOL.md §1, as carried by every frame.
 * @typedef {object} Lock
 * @property {string} entityType
 * @property {string} entityUid
 * @property {string} holderOid
 * @property {string} holderName
 * @property {string} acquiredAtUtc  RFC 3339
 * @property {string} expiresAtUtc   RFC 3339
 */

/**
 * @typedef {object} Holder
 * @property {string} oid
 * @property {string} name
 */

/**
 * One person viewing an entity (PROTOCOL.md §9): one entry per oid however many tabs
 * they view it from, `since` the earliest.
 * @typedef {object} Viewer
 * @property {string} oid
 * @property {string} name
 * @property {string} since  RFC 3339
 * @property {ViewerState} [state]  version 3: `editing` (holds the lock), `waiting`
 *   (intent edit while someone else holds it) or `looking`; absent from an older hub
 * @property {number} [position]  version 3, a waiting viewer's place in line (1: next)
 */

/**
 * What a viewer does (PROTOCOL.md §9, version 3).
 * @typedef {'editing'|'waiting'|'looking'} ViewerState
 */

/**
 * Why a page views an entity (PROTOCOL.md §9, version 3): `edit` waits in line while
 * someone else holds the lock (§11), `look` only looks.
 * @typedef {'edit'|'look'} Intent
 */

/**
 * A `nudge` frame of PROTOCOL.md §9: a viewer asks the holder to finish.
 * @typedef {object} Nudge
 * @property {string} entityType
 * @property {string} entityUid
 * @property {Holder} from
 * @property {string} at  RFC 3339
 */

/**
 * The welcome frame.
 * @typedef {object} Welcome
 * @property {string} connectionId
 * @property {string} tenant
 * @property {Holder} holder
 * @property {number} leaseMs
 * @property {number} renewMs
 * @property {string} serverTime
 * @property {string[]} lockable
 * @property {boolean} canTakeOver
 */

/**
 * The answer to a request: a `result` frame without `id` and `type`.
 * @typedef {object} Result
 * @property {string} [outcome]  acquired, renewed, locked, lost, released, notHeld, takenOver, forbidden, unknown, unwatched, refreshed,
 *   unviewed, nudged
 * @property {Lock|null} [lock]
 * @property {Lock[]} [locks]
 * @property {boolean} [pending]  a release that takes effect when the hub notices an
 *   instance died (version 3, PROTOCOL.md §4)
 * @property {number} [count]  releaseMany: how many were released (version 3, §12)
 * @property {Holder} [previousHolder]
 */

/**
 * A change of a watched type: a lock event of PROTOCOL.md §3, or `Snapshot` when a
 * snapshot replaced the map, or `Expired` with `local: true` when the client hid a lock
 * whose `expiresAtUtc` passed before the hub said so.
 * @typedef {object} Change
 * @property {'Acquired'|'Renewed'|'Released'|'TakenOver'|'Expired'|'Snapshot'} op
 * @property {Lock} [lock]
 * @property {Holder} [previousHolder]
 * @property {string} [at]
 * @property {boolean} [local]
 */

/**
 * A `lock` event frame of PROTOCOL.md §3, as the client reads it.
 * @typedef {{op: Change['op'], lock: Lock, previousHolder?: Holder, by?: Holder, at?: string}} LockEvent
 */

/**
 * An error answering a request: an `error` frame (`code` bad_request, not_lockable,
 * invalid_entity, rate_limited, too_many_locks, too_many_views, forbidden,
 * store_unavailable; too_many_sockets answers the `auth` of a person with too many
 * sockets on the instance, reported through `onError` before the 4429 close and a
 * reconnect with back-off) or a local failure (`disconnected`, `closed`, `timeout`).
 */
export class LockhubError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message);
    this.name = 'LockhubError';
    /** @type {string} */
    this.code = code;
  }
}
