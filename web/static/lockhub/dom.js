// @ts-check
/**
 * The DOM widgets of the lockhub client (`@lockhub/client/dom`): {@link LockForm},
 * {@link LockGrid} and {@link LockConsole}, built on the public API of the headless
 * core only, and a {@link LockClient} that makes them (`client.lockForm(...)`).
 *
 *     import { connect, de } from '@lockhub/client/dom';   // or '/static/lockhub/dom.js'
 *     const client = connect({ getToken, messages: de });
 *     client.lockGrid(table, 'ApprovalRequest', 'data-uid');
 *     const form = client.lockForm(formEl, 'ApprovalRequest', 'r-1001');
 *
 * Every text a user reads comes from a {@link Messages} table: English by default,
 * `messages` of `connect` for every widget of the client, or of each widget's options.
 *
 * @module lockhub/dom
 */

import { LockClient as CoreClient } from './connection.js';
import { LockConsole } from './console.js';
import { LockForm } from './form.js';
import { LockGrid } from './grid.js';

export { LockForm, LockGrid, LockConsole };
export * from './core.js';

/** @typedef {import('./connection.js').ConnectOptions} ConnectOptions */
/** @typedef {import('./messages.js').Messages} Messages */
/** @typedef {import('./form.js').LockFormOptions} LockFormOptions */
/** @typedef {import('./form.js').FormState} FormState */
/** @typedef {import('./form.js').OtherViewer} OtherViewer */
/** @typedef {import('./form.js').NudgeOutcome} NudgeOutcome */
/** @typedef {import('./grid.js').LockGridOptions} LockGridOptions */
/** @typedef {import('./console.js').LockConsoleOptions} LockConsoleOptions */

/**
 * @typedef {ConnectOptions & {messages?: Partial<Messages>}} DomConnectOptions
 *   `messages`: the texts of every widget this client makes (a widget's own
 *   `messages` option wins)
 */

/**
 * The client of the core, with the widgets. Create it with {@link connect}.
 */
export class LockClient extends CoreClient {
  /** @type {Partial<Messages>|undefined} */
  #messages;

  /** @param {DomConnectOptions} opts */
  constructor(opts) {
    super(opts);
    this.#messages = opts.messages;
  }

  /**
   * The texts the client's widgets show from now on (widgets already made keep theirs).
   * @param {Partial<Messages>|undefined} messages
   */
  setMessages(messages) {
    this.#messages = messages;
  }

  /**
   * Locks a detail form while it is open. See {@link LockForm}.
   * @param {HTMLElement} element  the form (or its container)
   * @param {string} type
   * @param {string} uid
   * @param {LockFormOptions} [options]
   * @returns {LockForm}
   */
  lockForm(element, type, uid, options = {}) {
    return new LockForm(this, element, type, uid, { ...options, messages: { ...this.#messages, ...options.messages } });
  }

  /**
   * Shows the locks of a type in a table. See {@link LockGrid}.
   * @param {HTMLTableElement} table
   * @param {string} type
   * @param {string|((row: HTMLTableRowElement) => string|null|undefined)} rowUid
   *   the row attribute holding the entity uid (e.g. `data-uid`), or a function of the row
   * @param {LockGridOptions} [options]
   * @returns {LockGrid}
   */
  lockGrid(table, type, rowUid, options = {}) {
    return new LockGrid(this, table, type, rowUid, { ...options, messages: { ...this.#messages, ...options.messages } });
  }

  /**
   * Shows the lock console of the tenant (PROTOCOL.md §10, the admin role). See
   * {@link LockConsole}.
   * @param {HTMLElement} element
   * @param {LockConsoleOptions} [options]
   * @returns {LockConsole}
   */
  lockConsole(element, options = {}) {
    return new LockConsole(this, element, { ...options, messages: { ...this.#messages, ...options.messages } });
  }
}

/**
 * Opens a client with the widgets. See {@link LockClient}.
 * @param {DomConnectOptions} opts
 * @returns {LockClient}
 */
export function connect(opts) {
  return new LockClient(opts);
}
