// One instance of the Wasm core: its raw exports, its linear memory and every
// view of that memory, its staging areas. It is the only way the bindings
// read or write linear memory: each manager holds the instance it was made on
// and goes through it, so nothing reaches memory through a global. The plain
// build has one instance per process (plain-core.ts); the shared-memory build
// has one per thread, all over one shared memory (shared-core.ts).
//
// Pointers cross the boundary as i32 and come back negative past 2 GiB: every
// pointer the bindings keep is made unsigned here (`>>> 0`) before use.

import { MAX_REGION_BYTES } from './abi.js';
import type { CoreExports } from './exports.js';
import { Staging, type StagingMemory } from './staging.js';
import type { MemViews } from './views.js';

/** Bytes at `at` in the memory of core `rt` (left there by one call for the next). */
export interface CoreBytes {
  readonly rt: CoreInstance;
  readonly at: number;
}

/** Where the core's bytes come from: a URL/Response (browsers) or bytes (Node). */
export type WasmSource =
  | ArrayBuffer
  | Uint8Array
  | WebAssembly.Module
  | Response
  | PromiseLike<Response>
  | URL
  | string;

const HEAP_STUCK =
  "kvpool: gave up waiting for the shared core's region lock (used while creating managers and staging areas); " +
  'a thread died in the middle of such a call, and the shared memory cannot take new regions any more';

export class CoreInstance implements StagingMemory {
  u8 = new Uint8Array(0);
  i32 = new Int32Array(0);
  u32 = new Uint32Array(0);
  f64 = new Float64Array(0);
  buffer: ArrayBufferLike = new ArrayBuffer(0);
  /** This instance's staging areas. */
  readonly staging: Staging;
  private closed = false;

  constructor(
    /** The raw exports (numbers in, numbers out). */
    readonly ex: CoreExports,
    readonly memory: WebAssembly.Memory,
    /** True for the shared-memory build (one instance per thread over one memory). */
    readonly shared: boolean,
  ) {
    const code = ex.abi_check();
    if (code !== 0) throw new Error(`kvpool: the Wasm core does not match these bindings (ABI check ${code}); rebuild both from one checkout`);
    this.refresh();
    this.staging = new Staging(this);
  }

  /**
   * Points the views at the memory's current buffer when it changed. A grown
   * plain memory gets a new buffer; a shared one may have been grown by
   * another thread, and its old views keep their old length, so the length
   * is what tells.
   */
  refresh(): void {
    const buf = this.memory.buffer;
    if (this.shared ? buf.byteLength === this.buffer.byteLength : buf === this.buffer) return;
    this.buffer = buf;
    this.u8 = new Uint8Array(buf);
    this.i32 = new Int32Array(buf);
    this.u32 = new Uint32Array(buf);
    this.f64 = new Float64Array(buf);
  }

  /** The views, current. */
  views(): MemViews {
    this.refresh();
    return this;
  }

  /** Runs a core call that may grow memory, then refreshes the views. Every export that allocates goes through here. */
  growing<T>(fn: (e: CoreExports) => T): T {
    this.live();
    let r: T;
    try {
      r = fn(this.ex);
    } finally {
      this.refresh();
    }
    if (this.shared && this.ex.heapLockStuck() !== 0) throw new Error(HEAP_STUCK);
    return r;
  }

  /**
   * A zeroed region of `bytes` bytes (unsigned pointer), or 0 when memory is
   * exhausted. A size the core could never hand out is refused here, before
   * it can wrap on its way through an i32 parameter.
   */
  alloc(bytes: number): number {
    if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > MAX_REGION_BYTES) return 0;
    return this.growing((e) => e.alloc(bytes)) >>> 0;
  }

  release(ptr: number): void {
    if (ptr !== 0) this.growing((e) => e.release(ptr));
  }

  /** Throws once the instance is closed (a thread that left its shared memory). */
  live(): void {
    if (this.closed) throw new Error('kvpool: this core instance was released (releaseThread); nothing made on it can be used');
  }

  /** Gives the staging areas back and refuses every later use. */
  close(): void {
    if (this.closed) return;
    this.staging.release();
    this.closed = true;
  }

  get isClosed(): boolean {
    return this.closed;
  }
}

/** Instantiates `module` and wraps it (`memory`: imported by the shared build). */
export function instantiateCore(module: WebAssembly.Module, memory?: WebAssembly.Memory): CoreInstance {
  const inst = new WebAssembly.Instance(module, memory ? { env: { memory } } : {});
  return wrapInstance(inst, memory);
}

export function wrapInstance(inst: WebAssembly.Instance, memory?: WebAssembly.Memory): CoreInstance {
  const ex = inst.exports as unknown as CoreExports;
  return new CoreInstance(ex, memory ?? ex.memory, memory !== undefined);
}
