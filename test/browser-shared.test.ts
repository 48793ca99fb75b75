// ConcurrentBlockManagerImpl in a real browser: a cross-origin isolated page
// (COOP/COEP headers) and a module Web Worker share one manager. Runs the
// compiled bindings (tsc into a temporary directory) in headless Chromium
// (test/support/browser.ts: skipped with a message without it, required in CI).

import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { CHROMIUM_ARGS, CHROMIUM_PATH, haveChromium, removeProfile } from './support/browser.js';

const ROOT = new URL('..', import.meta.url).pathname;

const PAGE = `<!doctype html><meta charset="utf-8"><title>kvpool shared</title>
<script type="module" src="/page.js"></script>`;

describe('ConcurrentBlockManagerImpl in a browser', () => {
  it.skipIf(!haveChromium)('a page and a Web Worker share a manager; the page\'s main thread spins for the lock', async () => {
    const dist = mkdtempSync(join(tmpdir(), 'kvpool-dist-'));
    const profile = mkdtempSync(join(tmpdir(), 'kvpool-chromium-'));
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', dist, '--declaration', 'false', '--sourceMap', 'false', '--inlineSources', 'false']);
    let resolveResult!: (r: Record<string, unknown>) => void;
    const result = new Promise<Record<string, unknown>>((res) => (resolveResult = res));
    const files: Record<string, () => [string, Buffer | string]> = {
      '/': () => ['text/html', PAGE],
      '/page.js': () => ['text/javascript', readFileSync(join(ROOT, 'test/browser/shared-page.js'))],
      '/worker.js': () => ['text/javascript', readFileSync(join(ROOT, 'test/browser/shared-worker.js'))],
      '/build/kvpool-shared.wasm': () => ['application/wasm', readFileSync(join(ROOT, 'build/kvpool-shared.wasm'))],
      '/build/kvpool.wasm': () => ['application/wasm', readFileSync(join(ROOT, 'build/kvpool.wasm'))],
      '/loader.js': () => ['text/javascript', readFileSync(join(ROOT, 'node_modules/@assemblyscript/loader/index.js'))],
    };
    // The msgpack build is split into modules next to its index.
    const msgpackDir = join(ROOT, 'node_modules/@msgpack/msgpack/dist.esm');
    // So are the YAML parser's and SHA-256's (whose own modules import one another by package name).
    const yamlDir = join(ROOT, 'node_modules/yaml/browser');
    const nobleDir = join(ROOT, 'node_modules/@noble/hashes/esm');
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'POST' && url.pathname === '/result') {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          res.end('ok');
          resolveResult(JSON.parse(body));
        });
        return;
      }
      let entry = files[url.pathname]?.();
      if (!entry && url.pathname.startsWith('/dist/') && !url.pathname.includes('..')) {
        const f = join(dist, url.pathname.slice('/dist/'.length));
        // Browsers resolve no bare specifiers (workers take no import map).
        if (existsSync(f)) {
          const js = readFileSync(f, 'utf8')
            .replaceAll("'@assemblyscript/loader'", "'/loader.js'")
            .replaceAll("'@msgpack/msgpack'", "'/msgpack/index.mjs'")
            .replaceAll("'yaml'", "'/yaml/index.js'")
            .replace(/'@noble\/hashes\/(\w+)'/g, "'/noble/$1.js'");
          entry = ['text/javascript', js];
        }
      }
      for (const [prefix, dir] of [['/yaml/', yamlDir], ['/noble/', nobleDir]] as const) {
        if (!entry && url.pathname.startsWith(prefix) && !url.pathname.includes('..')) {
          const f = join(dir, url.pathname.slice(prefix.length));
          if (existsSync(f)) entry = ['text/javascript', readFileSync(f, 'utf8').replace(/'@noble\/hashes\/(\w+)'/g, "'/noble/$1.js'")];
        }
      }
      if (!entry && url.pathname.startsWith('/msgpack/') && !url.pathname.includes('..')) {
        const f = join(msgpackDir, url.pathname.slice('/msgpack/'.length));
        if (existsSync(f)) entry = ['text/javascript', readFileSync(f)];
      }
      if (!entry) {
        res.statusCode = 404;
        res.end();
        return;
      }
      res.setHeader('Content-Type', entry[0]);
      res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
      res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
      res.end(entry[1]);
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const port = (server.address() as { port: number }).port;
    const browser = spawn(CHROMIUM_PATH, [...CHROMIUM_ARGS, `--user-data-dir=${profile}`, `http://127.0.0.1:${port}/`], { stdio: 'ignore' });
    try {
      const r = await Promise.race([
        result,
        new Promise<never>((_, rej) => setTimeout(() => rej(new Error('no result from the browser in 90 s')), 90_000)),
      ]);
      expect(r['error']).toBeUndefined();
      expect(r['isolated']).toBe(true);
      expect(r['mine']).toEqual([1, 2, 3]);
      const locked = r['locked'] as { threadId: number; usedSeen: number; depth: number };
      expect(locked.usedSeen).toBe(3); // the worker sees the page's allocation
      expect(locked.depth).toBe(1);
      expect(locked.threadId).toBeGreaterThan(1);
      expect(r['waited']).toEqual([4]); // got the lock once the worker let go
      // The worker let go only after it saw the page waiting on the lock word.
      expect(r['worker']).toEqual({ ids: [5, 6], threadId: locked.threadId, sawWaiter: true });
      expect(r['used']).toBe(6);
    } finally {
      // Chromium's helpers write to the profile until the browser has exited.
      if (browser.exitCode === null && browser.signalCode === null) {
        await new Promise((res) => {
          browser.once('exit', res);
          browser.kill();
        });
      }
      server.close();
      rmSync(dist, { recursive: true, force: true });
      removeProfile(profile);
    }
  });
});
