// @ts-check
/**
 * The lockhub demo page: the "My approvals" screen of the story, for QA and for the
 * end-to-end tests. Open it twice as two people (`/?user=u-ada`, `/?user=u-grace`) to
 * watch edit locks live. `&open=r-1001` opens a request at once.
 *
 * It signs in with development tokens (POST /dev/token, PROTOCOL.md §6), lists
 * GET /api/approval-requests in a grid with a live "Locked by" column (lockGrid), and
 * opens a request in a detail form that holds the edit lock while it is open
 * (lockForm), with Approve, Reject and Save calling the guarded API (§5).
 *
 * This file only wires the parts, each a module with its own state:
 *
 * - users.js: the people, the "Signed in as" picker and the sign-in list;
 * - session.js: the person's tokens and API calls (Session);
 * - conn.js: the connection indicator (ConnIndicator);
 * - grid.js: the grid of requests (GridView);
 * - detail.js: the detail form of the open request (DetailView);
 * - the lock console (client.lockConsole), for a person with the admin role;
 * - text.js and dom.js: what the page says, and finding its elements.
 */
import { connect, de } from '/static/lockhub.js';
import { ConnIndicator } from './conn.js';
import { DetailView } from './detail.js';
import { byId } from './dom.js';
import { GridView } from './grid.js';
import { Session } from './session.js';
import { setUpPicker, showSignin, userFrom } from './users.js';

/** @typedef {import('./users.js').User} User */

const params = new URLSearchParams(location.search);
const user = userFrom(params);
// The language of lockhub's widgets (banner, presence, grid column, console): the
// client's messages option; the demo's own texts stay English.
const lang = params.get('lang') === 'de' ? 'de' : 'en';
const langPicker = /** @type {HTMLSelectElement} */ (byId('lang-picker'));
langPicker.value = lang;
langPicker.addEventListener('change', () => {
  params.set('lang', langPicker.value);
  location.search = params.toString();
});
const conn = new ConnIndicator();

setUpPicker(/** @type {HTMLSelectElement} */ (byId('user-picker')), user);
if (!user) {
  showSignin(byId('signin'), byId('signin-list'));
  conn.set('idle', 'Not signed in');
} else {
  start(user, params.get('open'));
}

/**
 * The page of a signed-in person: the connection, the grid and the detail form.
 * @param {User} me
 * @param {string|null} open  a request to open once the grid is loaded
 */
function start(me, open) {
  document.title = `My approvals · ${me.name}`;
  const session = new Session(me);
  const client = connect({
    getToken: (why) => session.getToken(why),
    onState: (s) => conn.show(s),
    messages: lang === 'de' ? de : undefined,
  });
  const grid = new GridView(client, session, me);
  const detail = new DetailView(client, session, grid);
  grid.onOpen = (uid) => void detail.open(uid);
  grid.onRowUpdated = (row) => detail.rowUpdated(row);
  const lockConsole = me.roles.includes('Locks.Admin') ? showConsole(client) : null;

  // For QA in the console and for the end-to-end tests.
  Object.assign(window, {
    lockhubDemo: {
      client,
      user: me,
      get current() {
        return detail.summary;
      },
      open: (/** @type {string} */ uid, /** @type {{focus?: boolean}} */ opts) => detail.open(uid, opts),
      close: () => detail.close(false),
      reload: () => grid.load(),
      lockConsole,
    },
  });

  void grid.load().then(() => {
    if (open) void detail.open(open);
  });
}

/**
 * Shows the lock console (PROTOCOL.md §10) above the grid.
 * @param {import('/static/lockhub.js').LockClient} client
 */
function showConsole(client) {
  byId('console-card').hidden = false;
  return client.lockConsole(byId('lock-console'));
}
