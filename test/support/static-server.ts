// A tiny static file server on 127.0.0.1 for the browser tests. With
// `transpile`, a request for `x.js` that only exists as `x.ts` is answered
// with the module transpiled file by file (what `tsc` emits into dist/,
// isolatedModules being on), so the bindings run in the browser as plain ESM
// without a build step.

import { readFile, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import ts from 'typescript';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jsonl': 'text/plain; charset=utf-8',
};

export interface StaticServer {
  url: string;
  /** Paths requested so far (for tests that assert what was fetched). */
  requests: string[];
  close(): Promise<void>;
}

async function isFile(p: string): Promise<boolean> {
  return stat(p).then(
    (s) => s.isFile(),
    () => false,
  );
}

export async function serveStatic(root: string, options: { transpile?: boolean } = {}): Promise<StaticServer> {
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
      requests.push(path);
      let file = normalize(join(root, path.endsWith('/') ? path + 'index.html' : path));
      if (file !== root && !file.startsWith(root.endsWith(sep) ? root : root + sep)) {
        res.writeHead(403).end();
        return;
      }
      let body: Buffer | string;
      let type = TYPES[extname(file)] ?? 'application/octet-stream';
      if (await isFile(file)) body = await readFile(file);
      else if (options.transpile && file.endsWith('.js') && (await isFile(file.slice(0, -3) + '.ts'))) {
        file = file.slice(0, -3) + '.ts';
        const src = await readFile(file, 'utf8');
        body = ts.transpileModule(src, {
          fileName: file,
          compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, verbatimModuleSyntax: true },
        }).outputText;
        type = TYPES['.js']!;
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${path}`);
        return;
      }
      res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
    })().catch((e: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(String(e));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('static server: no port');
  return {
    url: `http://127.0.0.1:${addr.port}`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((e) => (e ? reject(e) : resolve()));
      }),
  };
}
