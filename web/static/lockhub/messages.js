// @ts-check
/**
 * Every text a user reads in the widgets (form, grid, console), as one table: the
 * `messages` option of a widget (or of `connect` in the DOM entry, for all of them)
 * takes a partial table whose members replace the English ones. {@link en} is the
 * default, {@link de} the German one; a page adds its own language the same way.
 *
 * Names and times reach these functions already cleaned and formatted (HH:MM, the
 * user's local clock).
 *
 * @module lockhub/messages
 */

/** @typedef {'editing'|'waiting'|'viewing'|'looking'} Activity */

/**
 * @typedef {object} Messages
 * @property {(name: string, since: string, until: string) => string} lockedBy  a form's banner while someone else holds the lock
 * @property {(position: number) => string} place  appended to lockedBy while this person waits in line (PROTOCOL.md §11); position 1 is next
 * @property {string} lockedBySomeone  the banner when the holder is not known
 * @property {string} notAllowed  appended when the hub answered forbidden
 * @property {(name: string, at: string) => string} takenOver
 * @property {string} someone  who took it over, when nobody is named
 * @property {(name: string, at: string) => string} releasedBy  an administrator released it
 * @property {(at: string) => string} releasedElsewhere  another app released it
 * @property {(note: string) => string} withoutLock  locks refused for a reason (`note`)
 * @property {string} unavailable  the hub's locks are down: fail open
 * @property {string} releasing  a release the hub answered `pending` (PROTOCOL.md §4)
 * @property {string} released  the form's release went through
 * @property {string} releasedHere  a pending release after which the lock lives on with this person's other tab
 * @property {string} takeOver  the button
 * @property {string} stopWaiting  the button of a waiting person: leave the line
 * @property {string} waitInLine  the button after "Stop waiting": join the line again
 * @property {string} free  the banner of a person who stopped waiting, once the lock went
 * @property {string} edit  the button then: claim it
 * @property {string} dismiss
 * @property {string} alsoHere  the label of the list of others
 * @property {(name: string, activity: Activity, position: number) => string} viewer  one line of that list; position is a waiting viewer's place, else 0
 * @property {(n: number) => string} more
 * @property {(at: string) => string} hereSince
 * @property {(name: string) => string} askToFinish  the nudge button
 * @property {string} asking
 * @property {(outcome: string, holder: string, at: string, holderHere: boolean) => string} asked  after a nudge
 * @property {(name: string, at: string) => string} nudged  the holder's notice
 * @property {string} gridHeader  the grid's column
 * @property {string} you  next to the holder's name in the grid
 * @property {(until: string) => string} youEditUntil  the title of a row I hold
 * @property {(until: string, left: string) => string} until  a live expiry
 * @property {string[]} consoleColumns  Entity, Holder, Since, Expires
 * @property {string} entityType
 * @property {string} entityUid
 * @property {string} uidPlaceholder
 * @property {string} showHistory
 * @property {string} older
 * @property {string} history
 * @property {string} needsAdmin
 * @property {(why: string) => string} locksUnreadable
 * @property {(n: number) => string} locksHeld
 * @property {string} nobodyHolds
 * @property {(name: string) => string} confirmRelease
 * @property {string} release
 * @property {string} cancel
 * @property {string} forceRelease
 * @property {(name: string, uid: string) => string} forceReleased
 * @property {(uid: string) => string} wasFree
 * @property {(uid: string) => string} storeDown
 * @property {(uid: string, why: string) => string} notReleased
 * @property {(type: string, uid: string) => string} historyOf
 * @property {string} nothingRecorded
 * @property {(why: string) => string} historyUnreadable
 * @property {(owner: string|null, op: string, by: string|null, reason: string) => string} auditLine  owner null: "A lock"
 */

/** @param {number} n */
function ordinal(n) {
  const s = n % 100 >= 11 && n % 100 <= 13 ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' })[n % 10] || 'th';
  return `${n}${s}`;
}

/** @type {Record<string, string>} */
const OP_EN = { Acquired: 'acquired', Released: 'released', TakenOver: 'taken over', Expired: 'expired', ForceReleased: 'force released' };
/** @type {Record<string, string>} */
const OP_DE = { Acquired: 'gesetzt', Released: 'freigegeben', TakenOver: 'übernommen', Expired: 'abgelaufen', ForceReleased: 'zwangsweise freigegeben' };

/**
 * English, the default.
 * @type {Readonly<Messages>}
 */
export const en = Object.freeze({
  lockedBy: (name, since, until) => `Locked by ${name} since ${since} (until ${until})`,
  place: (p) => (p === 1 ? ' · you are next' : ` · ${ordinal(p)} in line`),
  lockedBySomeone: 'Someone else is editing this.',
  notAllowed: '. You are not allowed to take it over.',
  takenOver: (name, at) => `${name} took over this record at ${at}. The form is read-only; your unsaved changes were not saved.`,
  someone: 'Someone',
  releasedBy: (name, at) => `${name} released your lock at ${at}. The form is read-only; reopen it to edit again.`,
  releasedElsewhere: (at) => `Your lock was released elsewhere at ${at} (the record may have been decided in another app). The form is read-only; reopen it to edit again.`,
  withoutLock: (note) => `Editing without a lock (${note}).`,
  unavailable: 'Edit locks are unavailable right now; you can edit, but others are not kept out.',
  releasing: 'Releasing…',
  released: 'Released. Reopen the form to edit again.',
  releasedHere: 'Released here; your other tab still holds the lock.',
  takeOver: 'Take over',
  stopWaiting: 'Stop waiting',
  waitInLine: 'Wait for it',
  free: 'Nobody is editing this now.',
  edit: 'Edit',
  dismiss: 'Dismiss',
  alsoHere: 'Also on this record',
  viewer: (name, activity, position) => (position > 0 ? `${name} is waiting (${ordinal(position)})` : `${name} is ${activity}`),
  more: (n) => `and ${n} more`,
  hereSince: (at) => `here since ${at}`,
  askToFinish: (name) => `Ask ${name} to finish`,
  asking: 'Asking…',
  asked: (outcome, holder, at, holderHere) => {
    switch (outcome) {
      case 'nudged':
        return holderHere ? `Asked at ${at}.` : `Asked at ${at}; ${holder} does not have it open right now.`;
      case 'rateLimited':
        return 'You asked recently; try again in a little while.';
      case 'notHeld':
        return `${holder} no longer holds it.`;
      case 'unknown':
        return 'Could not ask: locks are unavailable right now.';
      default:
        return 'Could not ask; try again.';
    }
  },
  nudged: (name, at) => (at ? `${name} asks you to finish (${at})` : `${name} asks you to finish`),
  gridHeader: 'Locked by',
  you: 'you',
  youEditUntil: (until) => `You are editing this (until ${until})`,
  until: (until, left) => `until ${until} · ${left}`,
  consoleColumns: ['Entity', 'Holder', 'Since', 'Expires'],
  entityType: 'Entity type',
  entityUid: 'Entity uid',
  uidPlaceholder: 'uid, e.g. r-1001',
  showHistory: 'Show history',
  older: 'Older',
  history: 'History',
  needsAdmin: 'The lock console needs the administrator role.',
  locksUnreadable: (why) => `The locks could not be read (${why}).`,
  locksHeld: (n) => (n === 1 ? '1 lock is held now.' : `${n} locks are held now.`),
  nobodyHolds: 'Nobody holds a lock.',
  confirmRelease: (name) => `Release ${name}'s lock? Unsaved changes in their form are lost.`,
  release: 'Release',
  cancel: 'Cancel',
  forceRelease: 'Force release',
  forceReleased: (name, uid) => `Released ${name}'s lock on ${uid}.`,
  wasFree: (uid) => `${uid} was free already.`,
  storeDown: (uid) => `${uid}: the lock store did not answer; try again.`,
  notReleased: (uid, why) => `${uid} was not released: ${why}`,
  historyOf: (type, uid) => `History of ${type} ${uid}`,
  nothingRecorded: 'Nothing recorded.',
  historyUnreadable: (why) => `The history could not be read: ${why}`,
  auditLine: (owner, op, by, reason) =>
    `${owner ? `${owner}'s lock` : 'A lock'} ${OP_EN[op] || op}${by ? ` by ${by}` : ''} (${reason})`,
});

/** @type {Record<Activity, string>} */
const ACTIVITY_DE = { editing: 'bearbeitet', waiting: 'wartet', viewing: 'sieht zu', looking: 'sieht zu' };

/**
 * German.
 * @type {Readonly<Messages>}
 */
export const de = Object.freeze({
  lockedBy: (name, since, until) => `Gesperrt von ${name} seit ${since} (bis ${until})`,
  place: (p) => (p === 1 ? ' · Sie sind als Nächste dran' : ` · ${p}. in der Warteschlange`),
  lockedBySomeone: 'Jemand anderes bearbeitet dies.',
  notAllowed: '. Sie dürfen nicht übernehmen.',
  takenOver: (name, at) => `${name} hat diesen Datensatz um ${at} übernommen. Das Formular ist schreibgeschützt; Ihre ungespeicherten Änderungen wurden nicht gespeichert.`,
  someone: 'Jemand',
  releasedBy: (name, at) => `${name} hat Ihre Sperre um ${at} aufgehoben. Das Formular ist schreibgeschützt; öffnen Sie es erneut, um zu bearbeiten.`,
  releasedElsewhere: (at) => `Ihre Sperre wurde um ${at} anderswo aufgehoben (vielleicht wurde der Datensatz in einer anderen Anwendung entschieden). Das Formular ist schreibgeschützt; öffnen Sie es erneut, um zu bearbeiten.`,
  withoutLock: (note) => `Bearbeitung ohne Sperre (${note}).`,
  unavailable: 'Sperren sind gerade nicht verfügbar; Sie können bearbeiten, aber andere werden nicht ferngehalten.',
  releasing: 'Wird freigegeben…',
  released: 'Freigegeben. Öffnen Sie das Formular erneut, um zu bearbeiten.',
  releasedHere: 'Hier freigegeben; Ihr anderer Tab hält die Sperre noch.',
  takeOver: 'Übernehmen',
  stopWaiting: 'Nicht mehr warten',
  waitInLine: 'Warten',
  free: 'Gerade bearbeitet niemand diesen Datensatz.',
  edit: 'Bearbeiten',
  dismiss: 'Schließen',
  alsoHere: 'Ebenfalls bei diesem Datensatz',
  viewer: (name, activity, position) => (position > 0 ? `${name} wartet (${position}.)` : `${name} ${ACTIVITY_DE[activity] || activity}`),
  more: (n) => `und ${n} weitere`,
  hereSince: (at) => `hier seit ${at}`,
  askToFinish: (name) => `${name} bitten, fertig zu werden`,
  asking: 'Wird gefragt…',
  asked: (outcome, holder, at, holderHere) => {
    switch (outcome) {
      case 'nudged':
        return holderHere ? `Gefragt um ${at}.` : `Gefragt um ${at}; ${holder} hat den Datensatz gerade nicht offen.`;
      case 'rateLimited':
        return 'Sie haben eben erst gefragt; versuchen Sie es gleich noch einmal.';
      case 'notHeld':
        return `${holder} hält die Sperre nicht mehr.`;
      case 'unknown':
        return 'Fragen nicht möglich: Sperren sind gerade nicht verfügbar.';
      default:
        return 'Fragen nicht möglich; versuchen Sie es erneut.';
    }
  },
  nudged: (name, at) => (at ? `${name} bittet Sie, fertig zu werden (${at})` : `${name} bittet Sie, fertig zu werden`),
  gridHeader: 'Gesperrt von',
  you: 'Sie',
  youEditUntil: (until) => `Sie bearbeiten dies (bis ${until})`,
  until: (until, left) => `bis ${until} · ${left}`,
  consoleColumns: ['Objekt', 'Inhaber', 'Seit', 'Läuft ab'],
  entityType: 'Objekttyp',
  entityUid: 'Objekt-ID',
  uidPlaceholder: 'ID, z. B. r-1001',
  showHistory: 'Verlauf zeigen',
  older: 'Älter',
  history: 'Verlauf',
  needsAdmin: 'Die Sperrkonsole erfordert die Administratorrolle.',
  locksUnreadable: (why) => `Die Sperren konnten nicht gelesen werden (${why}).`,
  locksHeld: (n) => (n === 1 ? '1 Sperre ist gesetzt.' : `${n} Sperren sind gesetzt.`),
  nobodyHolds: 'Niemand hält eine Sperre.',
  confirmRelease: (name) => `Sperre von ${name} aufheben? Ungespeicherte Änderungen in deren Formular gehen verloren.`,
  release: 'Aufheben',
  cancel: 'Abbrechen',
  forceRelease: 'Zwangsweise aufheben',
  forceReleased: (name, uid) => `Sperre von ${name} auf ${uid} aufgehoben.`,
  wasFree: (uid) => `${uid} war schon frei.`,
  storeDown: (uid) => `${uid}: Der Sperrspeicher antwortet nicht; versuchen Sie es erneut.`,
  notReleased: (uid, why) => `${uid} wurde nicht freigegeben: ${why}`,
  historyOf: (type, uid) => `Verlauf von ${type} ${uid}`,
  nothingRecorded: 'Nichts aufgezeichnet.',
  historyUnreadable: (why) => `Der Verlauf konnte nicht gelesen werden: ${why}`,
  auditLine: (owner, op, by, reason) =>
    `${owner ? `Sperre von ${owner}` : 'Eine Sperre'} ${OP_DE[op] || op}${by ? ` von ${by}` : ''} (${reason})`,
});

/**
 * The English table with the members of partial put over it.
 * @param {Partial<Messages>|undefined} partial
 * @returns {Messages}
 */
export function messagesOf(partial) {
  return partial ? { ...en, ...partial } : en;
}
