// Starts a worker thread on one of this folder's modules, compiled (dist/,
// a .js file) or from source (bindings/, a .ts file run through tsx, which
// only a development checkout has: Node 20 workers do not inherit the
// parent's loader hooks).

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/** `name` without extension, next to this module: `sweep-worker` is ./sweep-worker.js or ./sweep-worker.ts. */
export function startWorker(name: string, options: WorkerOptions): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  const entry = new URL(`./${name}${fromSource ? '.ts' : '.js'}`, import.meta.url);
  if (!fromSource) return new Worker(entry, options);
  // tsx's ESM API (its CommonJS build cannot import from an eval worker).
  const api = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
  const boot = `import(${JSON.stringify(api)}).then((m) => m.tsImport(${JSON.stringify(entry.href)}, ${JSON.stringify(import.meta.url)}))`;
  return new Worker(boot, { ...options, eval: true });
}
