// @ts-check
/**
 * Who is signed in: the people of the demo, the "Signed in as" picker, and the sign-in
 * list shown when the address names nobody. The choice lives in the address
 * (`/?user=u-ada`), so that two windows can be two people.
 */

/**
 * A person of the demo. `roles` go into the development token (PROTOCOL.md §6);
 * `role` is what the page calls them.
 * @typedef {object} User
 * @property {string} oid
 * @property {string} name
 * @property {string} tenant
 * @property {string[]} roles
 * @property {string} role
 */

/**
 * The people of the demo. Three office users, a supervisor and an administrator (the
 * lock console, PROTOCOL.md §10) of tenant acme, and one user of tenant globex who
 * must see none of acme's locks.
 * @type {User[]}
 */
export const USERS = [
  { oid: 'u-ada', name: 'Ada Lovelace', tenant: 'acme', roles: [], role: 'Office' },
  { oid: 'u-grace', name: 'Grace Hopper', tenant: 'acme', roles: [], role: 'Office' },
  { oid: 'u-edsger', name: 'Edsger Dijkstra', tenant: 'acme', roles: [], role: 'Office' },
  { oid: 'u-margaret', name: 'Margaret Hamilton', tenant: 'acme', roles: ['Locks.TakeOver'], role: 'Supervisor' },
  { oid: 'u-barbara', name: 'Barbara Liskov', tenant: 'acme', roles: ['Locks.Admin'], role: 'Administrator' },
  { oid: 'u-linus', name: 'Linus Torvalds', tenant: 'globex', roles: [], role: 'Office' },
];

/**
 * What a person's roles let them do, for the page: "" for none.
 * @param {User} u
 * @returns {string}
 */
export function roleText(u) {
  if (u.roles.includes('Locks.TakeOver')) return ' · may take over locks';
  if (u.roles.includes('Locks.Admin')) return ' · sees and releases every lock';
  return '';
}

/**
 * The user the address names (`?user=`), or null.
 * @param {URLSearchParams} params
 * @returns {User|null}
 */
export function userFrom(params) {
  return USERS.find((u) => u.oid === params.get('user')) || null;
}

/**
 * Fills the "Signed in as" picker and shows user in it; choosing another person
 * loads the page as them.
 * @param {HTMLSelectElement} picker
 * @param {User|null} user
 */
export function setUpPicker(picker, user) {
  for (const u of USERS) {
    const opt = document.createElement('option');
    opt.value = u.oid;
    opt.textContent = `${u.name} (${u.tenant}${u.role !== 'Office' ? `, ${u.role.toLowerCase()}` : ''})`;
    picker.append(opt);
  }
  picker.value = user ? user.oid : '';
  picker.addEventListener('change', () => {
    const next = new URLSearchParams();
    if (picker.value) next.set('user', picker.value);
    const lang = new URLSearchParams(location.search).get('lang');
    if (lang) next.set('lang', lang);
    location.search = next.toString();
  });
}

/**
 * Shows the sign-in card: one link per person.
 * @param {HTMLElement} card
 * @param {HTMLElement} list
 */
export function showSignin(card, list) {
  card.hidden = false;
  for (const u of USERS) {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.href = `?user=${encodeURIComponent(u.oid)}`;
    a.className = 'signin-user';
    a.dataset.testid = `signin-${u.oid}`;
    const name = document.createElement('strong');
    name.textContent = u.name;
    const meta = document.createElement('span');
    meta.className = 'muted';
    meta.textContent = `${u.role} · tenant ${u.tenant}${roleText(u)}`;
    a.append(name, meta);
    li.append(a);
    list.append(li);
  }
}
