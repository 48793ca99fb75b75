// The one owner of the Wasm core instance, its exports and every view of its
// linear memory. Managers call the raw exports through `core()`; views are
// rebuilt here after anything that can grow memory, never anywhere else.

import { instantiate, instantiateSync } from '@assemblyscript/loader';
import type { CoreExports } from './exports.js';
import { emptyViews, rebuildViews, type MemViews } from './views.js';

/** Where the core's bytes come from: a URL/Response (browsers) or bytes (Node). */
export type WasmSource =
  | ArrayBuffer
  | Uint8Array
  | WebAssembly.Module
  | Response
  | PromiseLike<Response>
  | URL
  | string;

let ex: CoreExports | null = null;
let loading: Promise<void> | null = null;
let syncLoader: (() => WebAssembly.Module | ArrayBuffer | Uint8Array) | null = null;
let defaultSource: (() => WasmSource) | null = null;
let defaultIsFallback = false;

/** Views of linear memory, valid until the next growth. */
export const mem: MemViews = emptyViews();

function refreshViews(): void {
  const buf = ex!.memory.buffer;
  if (buf !== mem.buffer) rebuildViews(mem, buf);
}

/**
 * Keeps the raw `instance.exports`: the loader's demangled wrappers add a
 * JS frame (~5-10 ns) to every call, and the core's exports take numbers only.
 */
function install(exports: CoreExports): void {
  ex = exports;
  refreshViews();
}

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
  return ex !== null;
}

/**
 * Loads and instantiates the Wasm core once. Browsers stream-compile it from
 * the package's `build/kvpool.wasm` (or the `source` given); Node reads the file.
 */
export function loadCore(source?: WasmSource): Promise<void> {
  if (ex) return Promise.resolve();
  if (loading) return loading;
  const src = source ?? defaultSource?.();
  if (src === undefined) {
    if (syncLoader) {
      coreSync();
      return Promise.resolve();
    }
    return Promise.reject(new Error('kvpool: no Wasm source to load the core from; pass one to loadCore()'));
  }
  loading = (async () => {
    let input: Parameters<typeof instantiate>[0];
    if (typeof src === 'string' || src instanceof URL) input = fetch(src);
    else input = src as Parameters<typeof instantiate>[0];
    const result = await instantiate(input, {});
    if (!ex) install(result.instance.exports as unknown as CoreExports);
  })();
  loading.catch(() => {
    loading = null;
  });
  return loading;
}

function coreSync(): CoreExports {
  if (!syncLoader) {
    throw new Error('kvpool: the Wasm core is not loaded yet; `await loadCore()` (or use an async `create()`) first');
  }
  const result = instantiateSync(syncLoader() as WebAssembly.Module, {});
  install(result.instance.exports as unknown as CoreExports);
  return ex!;
}

/** The raw exports; loads the core synchronously where the platform allows. */
export function core(): CoreExports {
  return ex ?? coreSync();
}

/**
 * Runs a core call that may grow linear memory and rebuilds the views after it.
 * Every export that allocates is called through here.
 */
export function growing<T>(fn: (e: CoreExports) => T): T {
  const e = core();
  try {
    return fn(e);
  } finally {
    refreshViews();
  }
}

/** Makes sure the views are current (after calls made outside `growing`). */
export function views(): typeof mem {
  core();
  refreshViews();
  return mem;
}
