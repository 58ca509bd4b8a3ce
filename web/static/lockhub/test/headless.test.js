// @ts-check
// The core stays headless: no module it imports, however deep, is a widget or touches
// the DOM (issue 27: connection.js used to import the form, grid and console).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The relative modules a file imports or re-exports. @param {string} file */
function importsOf(file) {
  const src = readFileSync(join(dir, file), 'utf8');
  return [...src.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'\.\/([^']+)'/gm)].map((m) => m[1]);
}

/** Every module reachable from entry. @param {string} entry */
function reachable(entry) {
  const seen = new Set([entry]);
  const todo = [entry];
  while (todo.length) for (const f of importsOf(/** @type {string} */ (todo.pop()))) if (!seen.has(f)) seen.add(f), todo.push(f);
  return seen;
}

it('core.js reaches no widget and no DOM', () => {
  const files = reachable('core.js');
  assert.ok(files.has('connection.js') && files.has('holds.js'), `the walk found ${[...files]}`);
  for (const w of ['dom.js', 'form.js', 'grid.js', 'console.js', 'react.js']) assert.ok(!files.has(w), `core.js reaches ${w}`);
  for (const f of files) {
    const code = readFileSync(join(dir, f), 'utf8').replace(/^\s*(\*|\/\/).*$/gm, '');
    assert.doesNotMatch(code, /\bdocument\.|\bHTMLElement\b|\bMutationObserver\b/, `${f} touches the DOM`);
  }
});

it('the widgets reach the core only through its public modules', () => {
  for (const w of ['form.js', 'grid.js', 'console.js']) {
    for (const f of importsOf(w)) assert.ok(!['holds.js', 'presence.js', 'watches.js', 'requests.js'].includes(f), `${w} imports ${f}`);
  }
});
