// The shared-memory build of the core (build/kvpool-shared.wasm), as this
// thread runs it: one instance per thread, all over the same shared
// WebAssembly.Memory, so every thread sees the same managers. A thread runs
// one shared memory: the first manager created here makes it, or the first
// descriptor attached brings it.

import { MAX_PAGES } from './abi.js';
import { CoreInstance, instantiateCore, wrapInstance, type WasmSource } from './core-instance.js';
import { checkCoreModule, compileSource } from './core-module.js';
import type { CoreExports } from './exports.js';

/** Exports only the shared build has. */
export interface SharedCoreExports extends CoreExports {
  /** A process-wide id for the calling instance: 1, 2, ... in instantiation order. */
  nextThreadId(): number;
  /** Gives the instance's own regions (hashing scratch) back; no calls afterwards. */
  threadRelease(): void;
}

/** Pages (64 KiB) the shared memory starts with, and its maximum (asconfig.json "shared" target): 4 GiB. */
export const SHARED_INITIAL_PAGES = 32;
export const SHARED_MAXIMUM_PAGES = MAX_PAGES;

interface ThreadCore {
  rt: CoreInstance;
  module: WebAssembly.Module;
  threadId: number;
}

let cur: ThreadCore | null = null;
let syncLoader: (() => WebAssembly.Module) | null = null;
let compiled: WebAssembly.Module | null = null;
let liveManagers = 0;

/** Registers how the Node entry compiles the shared build synchronously on first use. */
export function setSharedSyncLoader(fn: () => WebAssembly.Module): void {
  syncLoader = fn;
}

function adopt(module: WebAssembly.Module, rt: CoreInstance): void {
  // Its start function takes regions (hashing scratch).
  if (rt.ex.heapLockStuck() !== 0) throw new Error("kvpool: gave up waiting for the shared core's region lock while starting a thread");
  cur = { rt, module, threadId: (rt.ex as SharedCoreExports).nextThreadId() };
}

function newMemory(): WebAssembly.Memory {
  if (typeof SharedArrayBuffer === 'undefined') {
    throw new Error(
      'kvpool: shared WebAssembly memory is not available here (browsers need a cross-origin isolated page: COOP/COEP headers)',
    );
  }
  return new WebAssembly.Memory({ initial: SHARED_INITIAL_PAGES, maximum: SHARED_MAXIMUM_PAGES, shared: true });
}

function moduleSync(): WebAssembly.Module {
  if (compiled) return compiled;
  if (!syncLoader) {
    throw new Error(
      'kvpool: the shared-memory core is not loaded; `await ConcurrentBlockManagerImpl.ready(source)` first, ' +
        'with the URL or bytes of build/kvpool-shared.wasm (Node loads it by itself)',
    );
  }
  compiled = checkCoreModule(syncLoader(), true, 'the built-in core');
  return compiled;
}

/** True once this thread has its shared-memory instance. */
export function isSharedCoreLoaded(): boolean {
  return cur !== null;
}

/**
 * Compiles the shared build (from `source`, or the registered default) and,
 * unless this thread already has one, instantiates it over a new shared memory.
 */
export async function loadSharedCore(source?: WasmSource): Promise<void> {
  if (cur) return;
  if (!compiled) {
    if (source === undefined) {
      moduleSync();
    } else {
      // Checked before it is kept: a wrong module (the plain build is an easy
      // mistake in a browser) leaves nothing behind, and a later call with
      // the right one works.
      const checked = checkCoreModule(await compileSource(source, 'source'), true, 'source');
      compiled ??= checked;
    }
  }
  if (cur) return;
  const memory = newMemory();
  const instance = await WebAssembly.instantiate(compiled!, { env: { memory } });
  if (!cur) adopt(compiled!, wrapInstance(instance, memory));
}

/** This thread's instance, made over a new shared memory on first use. */
function threadCore(): ThreadCore {
  if (!cur) {
    const module = moduleSync();
    adopt(module, instantiateCore(module, newMemory()));
  }
  return cur!;
}

/** This thread's instance of the shared build (made on first use). */
export function sharedCore(): CoreInstance {
  return threadCore().rt;
}

/**
 * Makes this thread run the shared build over `memory` (from another thread's
 * descriptor). A no-op when it already does; an error when it runs another one.
 */
export function attachSharedCore(memory: WebAssembly.Memory, module: WebAssembly.Module): CoreInstance {
  if (cur) {
    // Two Memory objects over one backing store compare unequal after
    // postMessage; the data they hold is what matters. The manager may lie
    // in memory another thread grew since this one last looked.
    if (cur.rt.memory === memory || sameBacking(cur.rt, memory)) {
      cur.rt.refresh();
      return cur.rt;
    }
    throw new Error('kvpool: this thread already runs managers over another shared memory; a thread uses one shared memory');
  }
  checkCoreModule(module, true, 'descriptor.module');
  compiled ??= module;
  adopt(module, instantiateCore(module, memory));
  return cur!.rt;
}

// Probes whether a memory is the one `rt` runs over: write a word through
// one and read it through the other.
function sameBacking(rt: CoreInstance, b: WebAssembly.Memory): boolean {
  if (rt.memory.buffer.byteLength === 0 || b.buffer.byteLength === 0) return false;
  const probe = rt.alloc(16);
  if (probe === 0) return false;
  const ea = new Int32Array(rt.memory.buffer);
  const eb = new Int32Array(b.buffer);
  const w = probe >>> 2;
  try {
    Atomics.store(ea, w, 0x6b767031);
    return w < eb.length && Atomics.load(eb, w) === 0x6b767031;
  } finally {
    rt.release(probe);
  }
}

/** The memory, module and id of this thread's instance (creating it if needed). */
export function sharedCoreInfo(): { memory: WebAssembly.Memory; module: WebAssembly.Module; threadId: number } {
  const c = threadCore();
  return { memory: c.rt.memory, module: c.module, threadId: c.threadId };
}

/** Counts the managers this thread has open on its instance (see releaseSharedThread). */
export function trackSharedManager(delta: 1 | -1): void {
  liveManagers += delta;
}

/**
 * Gives this thread's regions of the shared memory back (staging areas and
 * hashing scratch, ~100 KB) and forgets the instance: for a worker about to
 * exit while the memory lives on. Every manager opened in this thread must be
 * disposed first; a later call here starts a new instance.
 */
export function releaseSharedThread(): void {
  if (liveManagers > 0) {
    throw new Error(`kvpool: ${liveManagers} shared-memory manager(s) of this thread are still open; dispose them first`);
  }
  if (!cur) return;
  const rt = cur.rt;
  cur = null;
  rt.close();
  (rt.ex as SharedCoreExports).threadRelease();
}
