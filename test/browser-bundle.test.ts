// The browser entry through a standard bundler: Vite bundles bindings/index.ts
// for the browser, and not one Node built-in may be imported anywhere in its
// module graph (the CLI and file reading live in the Node-only entry). The
// Wasm must come out as an asset fetched relative to the bundle.

import { builtinModules } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build, type Plugin, type Rollup } from 'vite';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUILTINS = new Set(builtinModules);

/** Records every import the bundler is asked to resolve, with its importer. */
function recordImports(seen: Array<{ id: string; importer: string }>): Plugin {
  return {
    name: 'record-imports',
    enforce: 'pre',
    resolveId(id, importer) {
      seen.push({ id, importer: importer ?? '(entry)' });
      return null;
    },
  };
}

async function bundle(entry: string) {
  const seen: Array<{ id: string; importer: string }> = [];
  const out = (await build({
    root: ROOT,
    configFile: false,
    logLevel: 'silent',
    plugins: [recordImports(seen)],
    build: { write: false, minify: false, modulePreload: false, rollupOptions: { input: entry, preserveEntrySignatures: 'exports-only' } },
  })) as Rollup.RollupOutput | Rollup.RollupOutput[];
  const outputs = (Array.isArray(out) ? out : [out]).flatMap((o) => o.output);
  return { seen, outputs };
}

const isNode = (id: string) => id.startsWith('node:') || BUILTINS.has(id) || BUILTINS.has(id.split('/')[0]!);

describe('browser bundle (Vite)', () => {
  it('bindings/index.ts imports no Node built-in and ships the Wasm as an asset', async () => {
    const { seen, outputs } = await bundle(fileURLToPath(new URL('../bindings/index.ts', import.meta.url)));
    expect(seen.length).toBeGreaterThan(10);
    expect(seen.filter((s) => isNode(s.id))).toEqual([]);
    const code = outputs.filter((o): o is Rollup.OutputChunk => o.type === 'chunk').map((c) => c.code).join('\n');
    expect(code).not.toMatch(/from\s*["']node:|import\(\s*["']node:|require\(/);
    expect(code).toContain('compileStreaming');
    const wasm = outputs.filter((o) => o.type === 'asset' && o.fileName.endsWith('.wasm'));
    expect(wasm.map((a) => a.fileName)).toEqual([expect.stringMatching(/^assets\/kvpool-[\w-]+\.wasm$/)]);
    expect(code).toContain(wasm[0]!.fileName.slice('assets/'.length));
  });

  it('catches a Node built-in reaching the bundle (the check can fail)', async () => {
    const { seen } = await bundle(fileURLToPath(new URL('../bindings/index.node.ts', import.meta.url)));
    expect(seen.filter((s) => isNode(s.id)).map((s) => s.id)).toContain('node:fs');
  });
});
