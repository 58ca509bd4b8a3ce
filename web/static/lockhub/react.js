// @ts-check
/**
 * React bindings of the lockhub client (`@lockhub/client/react`), over the headless
 * core only: a context for the client, {@link useLockClient}, {@link useLock} for a
 * form and {@link useLocks} for a grid. React is a peer dependency (18 or newer); no
 * JSX here, so the file loads without a build step wherever `react` resolves.
 *
 *     import { LockClientProvider, useLockClient, useLock } from '@lockhub/client/react';
 *
 *     function App() {
 *       const client = useLockClient({ getToken, url: 'wss://locks.example.com/ws' });
 *       return client && <LockClientProvider client={client}><Request uid="r-1001" /></LockClientProvider>;
 *     }
 *     function Request({ uid }) {
 *       const lock = useLock('ApprovalRequest', uid);
 *       if (lock.status === 'locked') return <p>Locked by {lock.holder?.name}, {lock.position}. in line
 *         <button onClick={lock.stopWaiting}>Stop waiting</button></p>;
 *       return <fieldset disabled={!lock.editable}>...</fieldset>;
 *     }
 *
 * @module lockhub/react
 */

import { createContext, createElement, useCallback, useContext, useEffect, useMemo, useState } from 'react';

import { connect } from './core.js';
import { activityOf, cleanName } from './format.js';

/** @typedef {import('./connection.js').LockClient} LockClient */
/** @typedef {import('./connection.js').ConnectOptions} ConnectOptions */
/** @typedef {import('./connection.js').ConnectionState} ConnectionState */
/** @typedef {import('./holds.js').HoldState} HoldState */
/** @typedef {import('./holds.js').HoldStatus} HoldStatus */
/** @typedef {import('./protocol.js').Lock} Lock */
/** @typedef {import('./protocol.js').Holder} Holder */
/** @typedef {import('./protocol.js').Viewer} Viewer */
/** @typedef {import('./protocol.js').Result} Result */
/** @typedef {import('./protocol.js').Intent} Intent */
/** @typedef {import('./protocol.js').Nudge} Nudge */

/** The client of the components below a {@link LockClientProvider}. */
export const LockClientContext = createContext(/** @type {LockClient|null} */ (null));

/**
 * Gives its children the client that {@link useLockClient} (without options),
 * {@link useLock} and {@link useLocks} use.
 * @param {{client: LockClient, children?: import('react').ReactNode}} props
 */
export function LockClientProvider({ client, children }) {
  return createElement(LockClientContext.Provider, { value: client }, children);
}

/**
 * The client. With options: connects when the component mounts and closes the client
 * when it unmounts (null until the effect ran; the options are read once). Without:
 * the client of the nearest {@link LockClientProvider}.
 * @param {ConnectOptions} [options]
 * @returns {LockClient|null}
 */
export function useLockClient(options) {
  const provided = useContext(LockClientContext);
  const [own, setOwn] = useState(/** @type {LockClient|null} */ (null));
  const wanted = !!options;
  useEffect(() => {
    if (!wanted || !options) return undefined;
    const c = connect(options);
    setOwn(c);
    return () => {
      c.close();
      setOwn(null);
    };
    // The options are read once, as a socket is opened once.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [wanted]);
  return wanted ? own : provided;
}

/**
 * The connection state of the client (`open`, `reconnecting`, ...), for an indicator.
 * @param {LockClient|null} [client]  default: the provided one
 * @returns {ConnectionState|null}
 */
export function useConnectionState(client) {
  const provided = useContext(LockClientContext);
  const c = client ?? provided;
  const [state, setState] = useState(/** @type {ConnectionState|null} */ (c ? c.state : null));
  useEffect(() => (c ? c.onStateChange(setState) : undefined), [c]);
  return state;
}

/**
 * Another person on the entity and what they do (PROTOCOL.md §9, §11).
 * @typedef {object} Other
 * @property {string} oid
 * @property {string} name
 * @property {string} since
 * @property {'editing'|'waiting'|'viewing'} activity
 * @property {number} position  a waiting person's place in line (1: next), else 0
 */

/**
 * What {@link useLock} returns.
 * @typedef {object} UseLock
 * @property {HoldStatus|'idle'|'connecting'} status  the hold's status; `idle` when not
 *   holding (hold: false, or before claim()), `connecting` without a client
 * @property {boolean} editable  held, claiming, or unknown (fail open)
 * @property {Lock|null} lock    mine when held, the holder's when locked
 * @property {Holder|null} holder  who holds it now, as far as this page knows
 * @property {Other[]} others    the other people on the entity, the hub's order
 * @property {Viewer[]} viewers  everyone, this person included
 * @property {number} position   this person's place in the waiting line (1: next), 0 if not waiting
 * @property {Intent} intent
 * @property {Nudge[]} nudges    who asked this person, the holder, to finish (latest first)
 * @property {() => void} claim  holds the lock (again): claims it now, and waits in line
 *   for it (intent edit) while someone else has it
 * @property {() => Promise<Result|undefined>} release  releases it and stops holding;
 *   status `releasing` while the hub's answer is pending, then `released`
 * @property {() => Promise<Result|undefined>} takeover  (the takeover role)
 * @property {() => Promise<Result>} nudge  asks the holder to finish
 * @property {() => void} stopWaiting  leaves the line (intent look)
 * @property {() => void} wait  joins the line again (intent edit), or claims the lock
 *   when it went while this person only looked (status `free`)
 */

/**
 * @typedef {object} UseLockOptions
 * @property {boolean} [hold]  hold the lock while mounted, as a form does. Default true.
 * @property {Intent} [intent]  `edit` (default): wait in line while someone else holds
 *   it; `look`: only look
 * @property {LockClient|null} [client]  default: the provided one
 */

/**
 * Holds an entity's lock while the component is mounted (unless `hold: false`), views
 * the entity with intent `edit` so that this person waits in line and gets the lock
 * handed over (PROTOCOL.md §11), and re-renders on every change of the lock, of who is
 * there and of the line.
 * @param {string} type
 * @param {string} uid
 * @param {UseLockOptions} [options]
 * @returns {UseLock}
 */
export function useLock(type, uid, options = {}) {
  const provided = useContext(LockClientContext);
  const client = options.client ?? provided;
  const [holding, setHolding] = useState(options.hold !== false);
  // A new hold after a released, ended or taken-over one: the hold's effect runs again.
  const [generation, setGeneration] = useState(0);
  const [intent, setIntent] = useState(/** @type {Intent} */ (options.intent === 'look' ? 'look' : 'edit'));
  const [hs, setHs] = useState(/** @type {HoldState|null} */ (null));
  const [viewers, setViewers] = useState(/** @type {Viewer[]} */ ([]));
  const [nudges, setNudges] = useState(/** @type {Nudge[]} */ ([]));
  const [, setWelcomed] = useState(0);
  /** @type {[import('./holds.js').Hold|null, (h: import('./holds.js').Hold|null) => void]} */
  const [hold, setHold] = useState(/** @type {import('./holds.js').Hold|null} */ (null));
  /** @type {[import('./presence.js').View|null, (v: import('./presence.js').View|null) => void]} */
  const [view, setView] = useState(/** @type {import('./presence.js').View|null} */ (null));

  useEffect(() => {
    if (!client) return undefined;
    const v = client.view(type, uid, {
      intent,
      onPresence: (list) => setViewers(list),
      onNudge: (n) => setNudges((prev) => [n, ...prev.filter((p) => p.from.oid !== n.from.oid)]),
    });
    setView(v);
    setViewers(v.viewers);
    const unsub = client.onWelcome(() => setWelcomed((n) => n + 1));
    return () => {
      unsub();
      v.close();
      setView(null);
      setViewers([]);
    };
    // The intent changes through the handle, not by viewing again.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [client, type, uid]);

  useEffect(() => {
    if (view) view.setIntent(intent);
  }, [view, intent]);

  useEffect(() => {
    if (!client || !holding) return undefined;
    const h = client.hold(type, uid, (s) => setHs(s));
    setHold(h);
    setHs(h.state);
    return () => {
      h.drop();
      setHold(null);
      setHs(null);
    };
  }, [client, type, uid, holding, generation]);

  const me = client?.me?.oid;
  const status = !client ? 'connecting' : hs ? hs.status : 'idle';
  if (status !== 'held' && nudges.length) setNudges([]);
  const lock = hs ? hs.lock : null;
  const holderOid = status === 'held' ? me : lock && (status === 'locked' || status === 'takenOver') ? lock.holderOid : null;
  /** @type {Holder|null} */
  const holder = status === 'held' && client?.me ? client.me : lock && holderOid ? { oid: lock.holderOid, name: cleanName(lock.holderName, lock.holderOid) } : null;
  const others = useMemo(
    () =>
      viewers
        .filter((v) => v.oid !== me)
        .map((v) => ({
          oid: v.oid,
          name: v.name,
          since: v.since,
          activity: /** @type {Other['activity']} */ (v.state === 'looking' ? 'viewing' : v.state || activityOf(v.oid, holderOid)),
          position: v.state === 'waiting' && v.position ? v.position : 0,
        })),
    [viewers, me, holderOid],
  );
  const mine = viewers.find((v) => v.oid === me);
  const position = mine && mine.state === 'waiting' && mine.position ? mine.position : 0;

  const claim = useCallback(() => {
    setIntent('edit'); // wanting it is waiting for it while someone else has it
    const st = hold ? hold.state.status : 'idle';
    if (st === 'released' || st === 'ended' || st === 'takenOver') {
      setGeneration((g) => g + 1); // drop this hold and make another
    } else if (hold && st === 'free') {
      hold.claim();
    }
    setHolding(true);
  }, [hold]);
  const release = useCallback(async () => {
    if (!hold) return undefined;
    setIntent('look');
    return hold.release();
  }, [hold]);
  const takeover = useCallback(async () => (hold ? hold.takeover() : undefined), [hold]);
  const nudge = useCallback(() => {
    if (!client) return Promise.reject(new Error('lockhub: no client'));
    return client.nudge(type, uid);
  }, [client, type, uid]);
  const stopWaiting = useCallback(() => setIntent('look'), []);
  const wait = useCallback(() => {
    setIntent('edit');
    // Freed while this person only looked: nobody is in line to hand it to; claim it.
    if (hold && hold.state.status === 'free') hold.claim();
  }, [hold]);

  return {
    status,
    editable: status === 'held' || status === 'claiming' || status === 'unknown',
    lock,
    holder,
    others,
    viewers,
    position,
    intent,
    nudges,
    claim,
    release,
    takeover,
    nudge,
    stopWaiting,
    wait,
  };
}

/**
 * The live locks of a type, for a grid: a new Map by entityUid after every change
 * (the snapshot, each event, a lease that ran out).
 * @param {string} type
 * @param {{client?: LockClient|null}} [options]
 * @returns {Map<string, Lock>}
 */
export function useLocks(type, options = {}) {
  const provided = useContext(LockClientContext);
  const client = options.client ?? provided;
  const [locks, setLocks] = useState(() => /** @type {Map<string, Lock>} */ (new Map()));
  useEffect(() => {
    if (!client) return undefined;
    const w = client.watch(type, (m) => setLocks(new Map(m)));
    setLocks(new Map(w.locks));
    return () => {
      w.close();
      setLocks(new Map());
    };
  }, [client, type]);
  return locks;
}
