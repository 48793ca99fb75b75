// The one owner, in this thread, of the shared-memory build of the core
// (build/kvpool-shared.wasm): one instance per thread, all over the same
// shared WebAssembly.Memory, so every thread sees the same managers. Its
// exports, memory views and staging areas live here, as instance.ts holds the
// plain core's. A thread runs one shared memory: the first manager created
// here makes it, or the first descriptor attached brings it.

import type { CoreExports } from './exports.js';
import type { CoreRuntime } from './runtime.js';
import { Staging } from './staging.js';
import { emptyViews, rebuildViews, type MemViews } from './views.js';
import type { WasmSource } from './instance.js';

/** Exports only the shared build has. */
export interface SharedCoreExports extends CoreExports {
  /** A process-wide id for the calling instance: 1, 2, ... in instantiation order. */
  nextThreadId(): number;
  /** Gives the instance's own regions (hashing scratch) back; no calls afterwards. */
  threadRelease(): void;
  /** 1 when a region call gave up waiting for the region lock (then cleared). */
  heapLockStuck(): number;
  /** Byte offset of the shared allocator state (its lock word first). */
  heapState(): number;
}

/** What a region call that gave up on the region lock reports. */
const HEAP_STUCK =
  'kvpool: gave up waiting for the shared core\'s region lock (used while creating managers and staging areas); ' +
  'a thread died in the middle of such a call, and the shared memory cannot take new regions any more';

/** Pages (64 KiB) the shared memory starts with, and its fixed maximum (asconfig.json "shared" target). */
export const SHARED_INITIAL_PAGES = 32;
export const SHARED_MAXIMUM_PAGES = 16384;

interface SharedCore {
  memory: WebAssembly.Memory;
  module: WebAssembly.Module;
  ex: SharedCoreExports;
  threadId: number;
}

let cur: SharedCore | null = null;
let syncLoader: (() => WebAssembly.Module) | null = null;
let compiled: WebAssembly.Module | null = null;

const mem: MemViews = emptyViews();

// Another thread may have grown the memory since the last look: a shared
// buffer's views keep their old length, so compare the length, not identity.
function refreshViews(): void {
  const buf = cur!.memory.buffer;
  if (buf.byteLength !== mem.buffer.byteLength) rebuildViews(mem, buf);
}

/** Registers how the Node entry compiles the shared build synchronously on first use. */
export function setSharedSyncLoader(fn: () => WebAssembly.Module): void {
  syncLoader = fn;
}

function instantiate(module: WebAssembly.Module, memory: WebAssembly.Memory, instance?: WebAssembly.Instance): void {
  const inst = instance ?? new WebAssembly.Instance(module, { env: { memory } });
  const ex = inst.exports as unknown as SharedCoreExports;
  if (ex.heapLockStuck()) throw new Error(HEAP_STUCK); // its start function takes regions
  cur = { memory, module, ex, threadId: ex.nextThreadId() };
  refreshViews();
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
  compiled = syncLoader();
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
      let src: unknown = source;
      if (typeof src === 'string' || src instanceof URL) src = fetch(src);
      if (src instanceof WebAssembly.Module) compiled = src;
      else if (typeof (src as PromiseLike<Response>).then === 'function' || src instanceof Response) {
        compiled = await WebAssembly.compileStreaming(src as Response | PromiseLike<Response>);
      } else compiled = await WebAssembly.compile(src as BufferSource);
    }
  }
  if (cur) return;
  const memory = newMemory();
  const instance = await WebAssembly.instantiate(compiled!, { env: { memory } });
  if (!cur) instantiate(compiled!, memory, instance);
}

/** This thread's instance, made over a new shared memory on first use. */
function sharedCore(): SharedCore {
  if (!cur) instantiate(moduleSync(), newMemory());
  return cur!;
}

/**
 * Makes this thread run the shared build over `memory` (from another thread's
 * descriptor). A no-op when it already does; an error when it runs another one.
 */
export function attachSharedCore(memory: WebAssembly.Memory, module: WebAssembly.Module): void {
  if (cur) {
    // Two Memory objects over one backing store compare unequal after
    // postMessage; the data they hold is what matters. The manager may lie
    // in memory another thread grew since this one last looked.
    if (cur.memory === memory || sameBacking(cur.memory, memory)) {
      refreshViews();
      return;
    }
    throw new Error('kvpool: this thread already runs managers over another shared memory; a thread uses one shared memory');
  }
  compiled ??= module;
  instantiate(module, memory);
}

// Probes whether two shared memories are the same: flip a byte of this
// thread's heap state through one and read it through the other.
function sameBacking(a: WebAssembly.Memory, b: WebAssembly.Memory): boolean {
  if (a.buffer.byteLength === 0 || b.buffer.byteLength === 0) return false;
  const ea = new Int32Array(a.buffer);
  const eb = new Int32Array(b.buffer);
  const probe = cur!.ex.alloc(16) >>> 2;
  if (probe === 0) return false;
  try {
    Atomics.store(ea, probe, 0x6b767031);
    return probe < eb.length && Atomics.load(eb, probe) === 0x6b767031;
  } finally {
    cur!.ex.release(probe << 2);
  }
}

/** The memory, module and id of this thread's instance (creating it if needed). */
export function sharedCoreInfo(): { memory: WebAssembly.Memory; module: WebAssembly.Module; threadId: number } {
  const c = sharedCore();
  return { memory: c.memory, module: c.module, threadId: c.threadId };
}

let staging: Staging | null = null;
let liveManagers = 0;

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
  staging?.release();
  cur.ex.threadRelease();
  cur = null;
  staging = null;
  mem.buffer = new ArrayBuffer(0);
  mem.u8 = new Uint8Array(0);
  mem.i32 = new Int32Array(0);
  mem.u32 = new Uint32Array(0);
  mem.f64 = new Float64Array(0);
}

function growing<T>(fn: (e: CoreExports) => T): T {
  const c = sharedCore();
  let r: T;
  try {
    r = fn(c.ex);
  } finally {
    refreshViews();
  }
  if (c.ex.heapLockStuck()) throw new Error(HEAP_STUCK);
  return r;
}

/** The runtime managers on the shared build use in this thread. */
export function sharedRuntime(): CoreRuntime {
  sharedCore();
  staging ??= new Staging(growing, mem);
  return {
    core: () => sharedCore().ex,
    mem,
    growing,
    views: () => {
      refreshViews();
      return mem;
    },
    staging,
  };
}
