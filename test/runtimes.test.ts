// The package as installed, in every runtime it claims: the README's first
// example, copied out of README.md unchanged, runs against the built package
// in Node, Deno, Bun, headless Chromium and Cloudflare's workerd, and prints
// the same thing everywhere. Deno, Bun and workerd are npm dev dependencies
// (their binaries ship inside the packages; nothing is downloaded here).

import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, launchChromium } from './support/browser.js';
import { serveStatic } from './support/static-server.js';
import { builtPackage, ROOT as root } from './support/built-package.js';

const bin = (name: string) => join(root, 'node_modules/.bin', name);
const proj = mkdtempSync(join(tmpdir(), 'kvpool-runtimes-'));

/** The first example of README.md, exactly as written there. */
function readmeExample(): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const at = readme.indexOf('test/runtimes.test.ts');
  const m = /```(?:js|ts)\n([\s\S]*?)```/.exec(readme.slice(at));
  if (at < 0 || !m) throw new Error('README.md: the example marked for test/runtimes.test.ts is missing');
  return m[1]!;
}

/**
 * Runs a runtime in an environment of the test's own: only what a process
 * needs to start, plus `env`. Nothing of the caller's (CI's FORCE_COLOR=0,
 * say, makes Deno colour its output even beside NO_COLOR=1).
 */
function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const own: Record<string, string> = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: proj, TMPDIR: tmpdir(), LANG: 'C.UTF-8', NO_COLOR: '1' };
  const r = spawnSync(cmd, args, { cwd: proj, encoding: 'utf8', timeout: 60_000, env: { ...own, ...env } });
  return { code: r.status, out: r.stdout, err: r.stderr + (r.error ? String(r.error) : '') };
}

let expected = '';

beforeAll(async () => {
  // A project with the package installed: the built dist/ (as `npm run
  // build:ts` makes it), package.json, the cores, and its dependencies.
  symlinkSync(join(await builtPackage(), 'node_modules'), join(proj, 'node_modules'));
  writeFileSync(join(proj, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies: { kvpool: '*' } }));
  writeFileSync(join(proj, 'example.mjs'), readmeExample());
  const node = run(process.execPath, ['example.mjs']);
  expect(node.err).toBe('');
  expected = node.out;
}, 240_000);

describe('the README example on the built package', () => {
  it('runs in Node and shows a prefix-cache hit', () => {
    expect(expected).toMatch(/^blocks( \d+)+ newest slot \d+\nreused 6 of 6 full blocks\n$/);
  });

  it('runs unchanged in Deno', () => {
    const r = run(bin('deno'), ['run', '--allow-read', 'example.mjs'], { DENO_DIR: join(proj, '.deno'), DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1' });
    expect(r.err).toBe('');
    expect(r.out).toBe(expected);
  });

  it('runs as the README says to save it, in a fresh `npm init -y` project (which writes "type": "commonjs")', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const name = /Save it as `([\w.-]+)` and run\s+`node \1`/.exec(readme)?.[1];
    expect(name, 'README.md names the file to save the first example in').toMatch(/\.mjs$/);
    const fresh = join(proj, 'fresh');
    mkdirSync(fresh, { recursive: true });
    symlinkSync(join(proj, 'node_modules'), join(fresh, 'node_modules'));
    writeFileSync(join(fresh, 'package.json'), JSON.stringify({ name: 'fresh', version: '1.0.0', main: 'index.js', type: 'commonjs', dependencies: { kvpool: '*' } }));
    writeFileSync(join(fresh, name!), readmeExample());
    const r = spawnSync(process.execPath, [name!], { cwd: fresh, encoding: 'utf8', timeout: 60_000, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: proj } });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(expected);
    // The same text in a .js file of that project is CommonJS, and fails: why the README names .mjs.
    writeFileSync(join(fresh, 'first.js'), readmeExample());
    expect(spawnSync(process.execPath, ['first.js'], { cwd: fresh, encoding: 'utf8', timeout: 60_000 }).status).not.toBe(0);
  });

  it("runs unchanged in Deno whatever the caller's colour settings (CI's FORCE_COLOR=0)", () => {
    const saved = process.env['FORCE_COLOR'];
    process.env['FORCE_COLOR'] = '0';
    try {
      const r = run(bin('deno'), ['run', '--allow-read', 'example.mjs'], { DENO_DIR: join(proj, '.deno'), DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1' });
      expect(r.err).toBe('');
      expect(r.out).toBe(expected);
    } finally {
      if (saved === undefined) delete process.env['FORCE_COLOR'];
      else process.env['FORCE_COLOR'] = saved;
    }
  });

  it('runs unchanged in Bun', () => {
    const r = run(bin('bun'), ['example.mjs'], { BUN_INSTALL_CACHE_DIR: join(proj, '.bun'), DO_NOT_TRACK: '1' });
    expect(r.err).toBe('');
    expect(r.out).toBe(expected);
  });

  describe.skipIf(!haveChromium)('in Chromium', () => {
    let close: () => Promise<void> = async () => {};
    afterAll(() => close());

    it('runs unchanged as a module script (plain ESM, the core fetched)', async () => {
      writeFileSync(
        join(proj, 'index.html'),
        `<!doctype html><link rel="icon" href="data:,"><script type="importmap">${JSON.stringify({
          imports: {
            kvpool: '/node_modules/kvpool/dist/index.js',
            '@assemblyscript/loader': '/node_modules/@assemblyscript/loader/index.js',
            '@msgpack/msgpack': '/node_modules/@msgpack/msgpack/dist.esm/index.mjs',
            yaml: '/node_modules/yaml/browser/index.js',
            '@noble/hashes/sha2': '/node_modules/@noble/hashes/esm/sha2.js',
            '@noble/hashes/utils': '/node_modules/@noble/hashes/esm/utils.js',
            '@noble/hashes/crypto': '/node_modules/@noble/hashes/esm/crypto.js',
          },
        })}</script><script type="module" src="/example.mjs"></script>`,
      );
      const server = await serveStatic(proj);
      const browser = await launchChromium();
      close = async () => {
        await browser.close();
        await server.close();
      };
      const page = await browser.context.newPage();
      const lines: string[] = [];
      const errors: string[] = [];
      page.on('console', (m) => (m.type() === 'log' ? lines.push(m.text()) : errors.push(m.text())));
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(`${server.url}/index.html`);
      for (let i = 0; i < 100 && lines.length < 2 && errors.length === 0; i++) await page.waitForTimeout(100);
      expect(errors).toEqual([]);
      expect(lines.join('\n') + '\n').toBe(expected);
      expect(server.requests).toContain('/node_modules/kvpool/build/kvpool.wasm');
    });
  });

  it('runs in workerd (the core as a Wasm module the worker imports, passed to loadCore)', async () => {
    // workerd lists its modules one by one, so the example is bundled (Vite,
    // the package's platform entry) into a test worker; its Wasm stays a
    // module of its own. The example's body runs in the worker's test()
    // handler, its output compared with Node's there.
    const example = readmeExample();
    const imports = example.split('\n').filter((l) => l.startsWith('import '));
    const body = example.split('\n').filter((l) => !l.startsWith('import ')).join('\n');
    const dir = join(proj, 'workerd');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(proj, 'worker-entry.mjs'),
      `${imports.join('\n')}
import { loadCore as preload } from 'kvpool';
import wasm from './kvpool.wasm';
const expected = ${JSON.stringify(expected)};
export default {
  async test() {
    await preload(wasm);
    const out = [];
    const console = { log: (...a) => out.push(a.join(' ')) };
${body}
    const got = out.join('\\n') + '\\n';
    if (got !== expected) throw new Error('workerd printed ' + JSON.stringify(got) + ', Node ' + JSON.stringify(expected));
  },
};
`,
    );
    await build({
      root: proj,
      configFile: false,
      logLevel: 'silent',
      resolve: { conditions: ['workerd', 'worker', 'browser', 'import', 'default'] },
      build: {
        outDir: dir,
        emptyOutDir: true,
        minify: false,
        target: 'esnext',
        lib: { entry: join(proj, 'worker-entry.mjs'), formats: ['es'], fileName: () => 'worker.mjs' },
        rollupOptions: { external: ['./kvpool.wasm'] },
      },
    });
    const bundle = readFileSync(join(dir, 'worker.mjs'), 'utf8');
    expect(bundle).not.toMatch(/from\s*["']node:/);
    cpSync(join(root, 'build/kvpool.wasm'), join(dir, 'kvpool.wasm'));
    writeFileSync(
      join(dir, 'config.capnp'),
      `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (services = [(name = "main", worker = .example)]);
const example :Workerd.Worker = (
  modules = [(name = "worker.mjs", esModule = embed "worker.mjs"), (name = "kvpool.wasm", wasm = embed "kvpool.wasm")],
  compatibilityDate = "2025-06-01",
);
`,
    );
    const r = run(bin('workerd'), ['test', join(dir, 'config.capnp')]);
    expect(r.err + r.out).toMatch(/\[ PASS \]/);
    expect(r.err + r.out).not.toMatch(/\[ FAIL \]/);
    expect(r.code).toBe(0);
  });
});

it('the runtimes are installed from npm, not downloaded', () => {
  for (const b of ['deno', 'bun', 'workerd']) expect(existsSync(bin(b)), b).toBe(true);
});
