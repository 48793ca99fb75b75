// The package as `npm install kvpool` lays it out, built once for every test
// file that needs it (the package and runtime tests run in parallel): a
// folder with node_modules/kvpool (dist/ as `npm run build:ts` makes it,
// package.json, the cores) and the dependencies the library imports. Keyed
// by a hash of what goes into the build, so an unchanged tree is reused.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const ROOT = resolve(new URL('../..', import.meta.url).pathname);

function key(): string {
  const h = createHash('sha256');
  // The checkout too: a build's source maps point into the checkout it was
  // built from, and two clones on one machine must not share one (the test
  // reading a map's source would read the other clone's file).
  h.update(ROOT);
  const files = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'scripts/typings-platform.mjs', 'scripts/bin-executable.mjs'];
  for (const f of readdirSync(join(ROOT, 'bindings'), { recursive: true, encoding: 'utf8' }).sort()) if (f.endsWith('.ts')) files.push(join('bindings', f));
  for (const f of files) h.update(f).update(readFileSync(join(ROOT, f)));
  return h.digest('hex').slice(0, 16);
}

function build(dir: string): void {
  const pkg = join(dir, 'node_modules/kvpool');
  mkdirSync(pkg, { recursive: true });
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(pkg, 'dist')]);
  execFileSync(process.execPath, [join(ROOT, 'scripts/typings-platform.mjs'), join(pkg, 'dist')]);
  cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
  execFileSync(process.execPath, [join(ROOT, 'scripts/bin-executable.mjs'), pkg]);
  symlinkSync(join(ROOT, 'build'), join(pkg, 'build'));
  symlinkSync(join(ROOT, 'traces'), join(pkg, 'traces'));
  symlinkSync(join(ROOT, 'profiles'), join(pkg, 'profiles'));
  for (const dep of ['@assemblyscript', '@msgpack', '@noble', 'yaml']) symlinkSync(join(ROOT, 'node_modules', dep), join(dir, 'node_modules', dep));
}

/** The folder holding node_modules/kvpool, built on first use (other processes wait for it). */
export async function builtPackage(): Promise<string> {
  const dir = join(tmpdir(), `kvpool-built-${key()}`);
  const done = join(dir, 'done');
  const lock = `${dir}.lock`;
  for (let waited = 0; !existsSync(done); waited += 100) {
    try {
      mkdirSync(lock);
    } catch {
      // Another test file is building it; a lock older than 3 minutes was left by a process that died.
      if (existsSync(lock) && Date.now() - statSync(lock).mtimeMs > 180_000) rmSync(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    try {
      rmSync(dir, { recursive: true, force: true });
      build(dir);
      writeFileSync(done, '');
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
  return dir;
}
