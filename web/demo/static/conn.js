// @ts-check
/**
 * The connection indicator of the top bar: what lockhub's connection state means to
 * the user.
 */
import { byTestid } from './dom.js';

/** @typedef {import('/static/lockhub.js').ConnectionState} ConnectionState */

/** The indicator (`[data-testid=conn]`), with its label and its detail. */
export class ConnIndicator {
  #el = byTestid('conn');
  #text = byTestid('conn-text');
  #detail = byTestid('conn-detail');

  /**
   * Shows a connection state of the lockhub client (its `onState`).
   * @param {ConnectionState} s
   */
  show(s) {
    switch (s.state) {
      case 'open':
        this.set('open', 'Live');
        break;
      case 'connecting':
        this.set('connecting', 'Connecting…');
        break;
      case 'reconnecting':
        this.set('reconnecting', 'Reconnecting…', s.retryInMs !== undefined ? `retry in ${Math.max(1, Math.ceil(s.retryInMs / 1000))} s` : '');
        break;
      case 'forbidden':
        this.set('forbidden', 'Not allowed: reload the page');
        break;
      default:
        this.set('closed', 'Disconnected');
    }
  }

  /**
   * Shows a state. The label is announced (the indicator is a polite live region) only
   * when it changes; the retry countdown is for the eye.
   * @param {string} state @param {string} label @param {string} [detail]
   */
  set(state, label, detail = '') {
    this.#el.dataset.state = state;
    if (this.#text.textContent !== label) this.#text.textContent = label;
    this.#detail.textContent = detail ? `(${detail})` : '';
  }
}
