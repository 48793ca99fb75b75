// The plain (single-threaded) build of the core, build/kvpool.wasm: one
// instance per process, loaded once, synchronously on first use where the
// platform allows (Node), or by `loadCore()`.

import { instantiate, instantiateSync } from '@assemblyscript/loader';
import { CoreInstance, wrapInstance, type WasmSource } from './core-instance.js';
import { checkCoreModule, compileSource } from './core-module.js';

export type { WasmSource } from './core-instance.js';

let current: CoreInstance | null = null;
let loading: Promise<void> | null = null;
let syncLoader: (() => WebAssembly.Module | ArrayBuffer | Uint8Array) | null = null;
let defaultSource: (() => WasmSource) | null = null;
let defaultIsFallback = false;

/** Registers how the Node entry loads the core synchronously on first use. */
export function setSyncLoader(fn: () => WebAssembly.Module | ArrayBuffer | Uint8Array): void {
  syncLoader = fn;
}

/**
 * Registers where `loadCore()` fetches the core from when called with no
 * source. A `fallback` registration (the browser default) never replaces a
 * platform's own, whichever module is evaluated first.
 */
export function setDefaultSource(fn: () => WasmSource, fallback = false): void {
  if (fallback && defaultSource && !defaultIsFallback) return;
  defaultSource = fn;
  defaultIsFallback = fallback;
}

/** True once the core is instantiated (synchronous constructors work from then on). */
export function isCoreLoaded(): boolean {
  return current !== null;
}

/**
 * Loads and instantiates the Wasm core once. Browsers stream-compile it from
 * the package's `build/kvpool.wasm` (or the `source` given); Node reads the file.
 */
export function loadCore(source?: WasmSource): Promise<void> {
  if (current) return Promise.resolve();
  if (loading) return loading;
  const src = source ?? defaultSource?.();
  if (src === undefined) {
    if (syncLoader) {
      plainCore();
      return Promise.resolve();
    }
    return Promise.reject(new Error('kvpool: no Wasm source to load the core from; pass one to loadCore()'));
  }
  loading = (async () => {
    const module = checkCoreModule(await compileSource(src, 'source'), false, 'source');
    const result = await instantiate(module, {});
    current ??= wrapInstance(result.instance);
  })();
  loading.catch(() => {
    loading = null;
  });
  return loading;
}

/** The plain core's instance; loads it synchronously where the platform allows. */
export function plainCore(): CoreInstance {
  if (current) return current;
  if (!syncLoader) {
    throw new Error('kvpool: the Wasm core is not loaded yet; `await loadCore()` (or use an async `create()`) first');
  }
  const result = instantiateSync(syncLoader() as WebAssembly.Module, {});
  current = wrapInstance(result.instance);
  return current;
}
