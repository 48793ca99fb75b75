// Where `loadCore()` with no argument gets the core: the browser default
// (wasm-default.ts: fetch build/kvpool.wasm next to the module and stream it)
// is a fallback that never replaces the Node entry's file loader, whichever
// of the two modules is evaluated first. Each case loads fresh module copies.

import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';

const WASM = readFileSync(new URL('../build/kvpool.wasm', import.meta.url));

type Instance = typeof import('../bindings/core/plain-core.js');

function stubFetch() {
  const fetch = vi.fn(async (url: URL | string) => new Response(WASM, { headers: { 'content-type': 'application/wasm' }, status: String(url).endsWith('/build/kvpool.wasm') ? 200 : 404 }));
  vi.stubGlobal('fetch', fetch);
  return fetch;
}

const ENTRIES = {
  'wasm-node': () => import('../bindings/wasm-node.js'),
  'wasm-default': () => import('../bindings/wasm-default.js'),
};

async function fresh(...modules: Array<keyof typeof ENTRIES>): Promise<Instance> {
  vi.resetModules();
  for (const m of modules) await ENTRIES[m]();
  return import('../bindings/core/plain-core.js');
}

describe('the default Wasm source', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.resetModules();
  });

  it('browser entry alone: fetches build/kvpool.wasm relative to the module and streams it', async () => {
    const fetch = stubFetch();
    const streaming = vi.spyOn(WebAssembly, 'compileStreaming');
    const inst = await fresh('wasm-default');
    expect(inst.isCoreLoaded()).toBe(false);
    await inst.loadCore();
    expect(inst.isCoreLoaded()).toBe(true);
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(String(fetch.mock.calls[0]![0])).toBe(new URL('../build/kvpool.wasm', import.meta.url).href);
    expect(streaming).toHaveBeenCalledTimes(1);
    expect(inst.plainCore().ex.mgr_num_free).toBeTypeOf('function');
    streaming.mockRestore();
  });

  for (const order of [
    ['wasm-node', 'wasm-default'],
    ['wasm-default', 'wasm-node'],
  ] as const) {
    it(`Node entry wins over the fallback (${order.join(' then ')})`, async () => {
      const fetch = stubFetch();
      const inst = await fresh(...order);
      await inst.loadCore();
      expect(inst.isCoreLoaded()).toBe(true);
      expect(fetch).not.toHaveBeenCalled();
    });
  }

  it('a platform source replaces the fallback; a later fallback does not replace it', async () => {
    const inst = await fresh();
    const used: string[] = [];
    inst.setDefaultSource(() => (used.push('fallback 1'), WASM), true);
    inst.setDefaultSource(() => (used.push('platform'), WASM));
    inst.setDefaultSource(() => (used.push('fallback 2'), WASM), true);
    await inst.loadCore();
    expect(used).toEqual(['platform']);
  });

  it('with no source at all, loadCore rejects with a clear message', async () => {
    const inst = await fresh();
    await expect(inst.loadCore()).rejects.toThrow('kvpool: no Wasm source to load the core from; pass one to loadCore()');
    expect(inst.isCoreLoaded()).toBe(false);
  });
});
