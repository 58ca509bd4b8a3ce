// @ts-check
// npm pack gives a tarball an application installs: pack it, install it into a fresh
// app directory (offline: the tarball has no dependencies), import each entry point
// under Node, and type-check a TypeScript file of the app against the shipped .d.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

describe('npm pack', () => {
  /** @type {string} */
  let work;
  /** @type {string} */
  let app;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'lockhub-pack-'));
    execFileSync(npm, ['pack', '--pack-destination', work, '--silent'], { cwd: pkgDir, stdio: ['ignore', 'pipe', 'inherit'] });
    const tgz = readdirSync(work).find((f) => f.endsWith('.tgz'));
    assert.ok(tgz, 'npm pack wrote no tarball');
    app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', '--silent', join(work, tgz)], { cwd: app, stdio: 'inherit' });
    // React, the peer of the react entry, as the app would have it.
    for (const dep of ['react', '@types/react']) {
      mkdirSync(dirname(join(app, 'node_modules', dep)), { recursive: true });
      symlinkSync(join(pkgDir, 'node_modules', dep), join(app, 'node_modules', dep));
    }
  });

  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('ships the entries, the styles and the types, and no tests', () => {
    const files = readdirSync(join(app, 'node_modules', '@lockhub', 'client'));
    for (const f of ['core.js', 'dom.js', 'react.js', 'lockhub.css', 'package.json', 'README.md', 'types']) {
      assert.ok(files.includes(f), `the package lacks ${f}: ${files.join(' ')}`);
    }
    for (const f of ['test', 'node_modules', 'tsconfig.json', 'examples']) assert.ok(!files.includes(f), `the package ships ${f}`);
  });

  for (const [entry, names] of /** @type {const} */ ([
    ['@lockhub/client', ['connect', 'LockClient', 'LockhubError', 'en', 'de']],
    ['@lockhub/client/core', ['connect', 'LockClient', 'systemClock']],
    ['@lockhub/client/dom', ['connect', 'LockClient', 'LockForm', 'LockGrid', 'LockConsole']],
    ['@lockhub/client/react', ['useLockClient', 'useLock', 'useLocks', 'LockClientProvider']],
  ])) {
    it(`imports ${entry} under node`, () => {
      const js = `const m = await import(${JSON.stringify(entry)}); console.log(JSON.stringify(Object.keys(m)));`;
      const out = execFileSync(process.execPath, ['--input-type=module', '-e', js], { cwd: app, encoding: 'utf8' });
      const keys = JSON.parse(out);
      for (const n of names) assert.ok(keys.includes(n), `${entry} does not export ${n}: ${keys.join(' ')}`);
    });
  }

  it('type-checks an application against the shipped types', () => {
    writeFileSync(join(app, 'app.ts'), `
import { connect, type HoldState, type Lock } from '@lockhub/client';
import { connect as connectDom, de } from '@lockhub/client/dom';
import { useLock, useLocks } from '@lockhub/client/react';
const client = connect({ getToken: () => 'jwt', url: 'wss://locks.example.com/ws' });
const hold = client.hold('ApprovalRequest', 'r-1001', (s: HoldState) => s.status);
const st: 'held' | string = hold.state.status;
const many: Promise<{ outcome?: string; locks?: Lock[] }> = client.claimMany('ApprovalRequest', ['r-1', 'r-2']);
const dom = connectDom({ getToken: () => 'jwt', messages: de });
export function Row(): string { const l = useLock('ApprovalRequest', 'r-1'); const m = useLocks('ApprovalRequest'); return l.status + m.size + l.position; }
// @ts-expect-error a hold is not a promise
hold.then;
export { st, many, dom };
`);
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, noEmit: true, lib: ['es2022', 'dom'], types: [] },
      files: ['app.ts'],
    }));
    execFileSync(process.execPath, [join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', app], { cwd: app, stdio: 'inherit' });
  });
});
