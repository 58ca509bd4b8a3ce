// @ts-check
/**
 * How an Angular application wraps the core: a service that owns one client and hands
 * out Subscribables (what Angular's `async` pipe and RxJS's `from()` take), so that a
 * component template reads `lock$ | async`. Plain JavaScript with JSDoc, so that it is
 * type-checked by tsc and runs under node --test with the fake socket; in an Angular
 * app the same class carries `@Injectable({providedIn: 'root'})` and its config comes
 * from an InjectionToken (see the README).
 *
 * @module lockhub/examples/angular
 */

import { connect } from '../../core.js';

/** @typedef {import('../../core.js').ConnectOptions} ConnectOptions */
/** @typedef {import('../../core.js').ConnectionState} ConnectionState */
/** @typedef {import('../../core.js').HoldState} HoldState */
/** @typedef {import('../../core.js').Viewer} Viewer */
/** @typedef {import('../../core.js').Intent} Intent */
/** @typedef {import('../../core.js').Result} Result */

/**
 * What Angular's async pipe subscribes to (rxjs `Subscribable`).
 * @template T
 * @typedef {{subscribe(observer: ((v: T) => void) | {next: (v: T) => void}): {unsubscribe(): void}}} Subscribable
 */

/**
 * One entity as a component shows it.
 * @typedef {object} LockView
 * @property {HoldState['status']} status
 * @property {{oid: string, name: string}|null} holder
 * @property {number} position  this person's place in line (1: next), else 0
 * @property {Viewer[]} others
 */

/**
 * @template T
 * @param {(emit: (v: T) => void) => () => void} start  starts on subscribe, returns the stop
 * @returns {Subscribable<T>}
 */
function subscribable(start) {
  return {
    subscribe(observer) {
      const next = typeof observer === 'function' ? observer : (/** @type {T} */ v) => observer.next(v);
      const stop = start(next);
      return { unsubscribe: stop };
    },
  };
}

/** The lock service of an Angular app: one client, Subscribables over it. */
export class LockService {
  /** @param {ConnectOptions} config */
  constructor(config) {
    this.client = connect(config);
  }

  /** The connection state, for an indicator. @type {Subscribable<ConnectionState>} */
  get state$() {
    return subscribable((emit) => this.client.onStateChange(emit));
  }

  /**
   * Holds an entity while subscribed (a form component's lifetime), waiting in line
   * with intent `edit`, and emits what the component shows.
   * @param {string} type
   * @param {string} uid
   * @returns {Subscribable<LockView> & {stopWaiting(): void}}
   */
  lock$(type, uid) {
    /** @type {Set<import('../../core.js').View>} */
    const views = new Set();
    return {
      ...subscribable((emit) => {
        const me = () => this.client.me?.oid;
        /** @type {HoldState} */
        let hs;
        /** @type {Viewer[]} */
        let viewers = [];
        const push = () => {
          const mine = viewers.find((v) => v.oid === me());
          const lock = hs.lock;
          emit({
            status: hs.status,
            holder: hs.status === 'held' ? this.client.me : lock && hs.status === 'locked' ? { oid: lock.holderOid, name: lock.holderName } : null,
            position: mine && mine.state === 'waiting' && mine.position ? mine.position : 0,
            others: viewers.filter((v) => v.oid !== me()),
          });
        };
        const hold = this.client.hold(type, uid, (s) => {
          hs = s;
          push();
        });
        hs = hold.state;
        const view = this.client.view(type, uid, {
          intent: 'edit',
          onPresence: (v) => {
            viewers = v;
            push();
          },
        });
        views.add(view);
        push();
        return () => {
          views.delete(view);
          view.close();
          hold.drop();
        };
      }),
      stopWaiting: () => {
        for (const v of views) v.setIntent('look');
      },
    };
  }

  /**
   * A bulk action's claim (PROTOCOL.md §12).
   * @param {string} type @param {string[]} uids
   * @returns {Promise<Result>}
   */
  claimMany(type, uids) {
    return this.client.claimMany(type, uids);
  }

  /** Angular calls it when the injector is destroyed. */
  ngOnDestroy() {
    this.client.close();
  }
}
