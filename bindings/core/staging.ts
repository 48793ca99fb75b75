// Staging areas in linear memory: how arrays cross the JS/Wasm boundary.
// A call copies its tokens/ids into one of these areas with a single
// TypedArray.set, passes the pointer, and reads results from the same place.
// Areas only grow (doubling), so steady-state calls allocate nothing.
// Each core instance has its own areas (a shared-memory instance: one set
// per thread, so threads never stage into the same bytes).

import type { CoreExports } from './exports.js';
import type { MemViews } from './views.js';
import { growing, mem } from './instance.js';

/**
 * Bytes kept writable in front of every area: chained block hashing puts the
 * parent's 16-byte hash right before a block's tokens (and restores them).
 */
export const HEADROOM = 16;

export type { MemViews } from './views.js';

type Growing = <T>(fn: (e: CoreExports) => T) => T;

class Area {
  private region = 0;
  private capacity = 0; // bytes usable after the headroom

  constructor(
    private readonly initial: number,
    private readonly growing: Growing,
  ) {}

  /** Byte pointer of an area holding at least `bytes` bytes. */
  ensure(bytes: number): number {
    if (bytes > this.capacity) this.grow(bytes);
    return this.region + HEADROOM;
  }

  /** Gives the region back (the area starts over empty). */
  release(): void {
    if (this.region !== 0) this.growing((e) => e.release(this.region));
    this.region = 0;
    this.capacity = 0;
  }

  private grow(bytes: number): void {
    let cap = Math.max(this.initial, this.capacity * 2);
    while (cap < bytes) cap *= 2;
    const region = this.growing((e) => e.alloc(cap + HEADROOM));
    if (region === 0) {
      throw new RangeError(`kvpool: Wasm memory exhausted while staging ${bytes} bytes`);
    }
    if (this.region !== 0) this.growing((e) => e.release(this.region));
    this.region = region;
    this.capacity = cap;
  }
}

/** The staging areas of one core instance. */
export class Staging {
  private readonly tokenArea: Area;
  private readonly idArea: Area;
  private readonly byteArea: Area;

  constructor(
    growing: Growing,
    private readonly mem: MemViews,
  ) {
    this.tokenArea = new Area(1 << 16, growing);
    this.idArea = new Area(1 << 14, growing);
    this.byteArea = new Area(1 << 12, growing);
  }

  /** Gives every area's region back to the core (a thread leaving a shared memory). */
  release(): void {
    this.tokenArea.release();
    this.idArea.release();
    this.byteArea.release();
  }

  /** Copies src[start, end) to linear memory at int32 index `at` (TypedArray.set takes plain arrays too). */
  private copyInto(src: ArrayLike<number>, start: number, end: number, at: number): void {
    const n = end - start;
    const i32 = this.mem.i32;
    if (n <= 8) {
      for (let i = 0; i < n; i++) i32[at + i] = src[start + i]!;
    } else if (src instanceof Int32Array) {
      i32.set(start === 0 && end === src.length ? src : src.subarray(start, end), at);
    } else if (start === 0 && end === src.length) {
      i32.set(src, at);
    } else {
      i32.set(Array.prototype.slice.call(src, start, end) as number[], at);
    }
  }

  /** Copies tokens into linear memory; returns their byte pointer (16 writable bytes before it). */
  stageTokens(tokens: ArrayLike<number>, start = 0, end = tokens.length): number {
    const ptr = this.tokenArea.ensure((end - start) * 4);
    this.copyInto(tokens, start, end, ptr >>> 2);
    return ptr;
  }

  /** Room for `n` int32 ids (to write into, or read back from). */
  idSpace(n: number): number {
    return this.idArea.ensure(n * 4);
  }

  /** Copies ids into linear memory; returns their byte pointer. */
  stageIds(ids: ArrayLike<number>, start = 0, end = ids.length): number {
    const ptr = this.idArea.ensure((end - start) * 4);
    this.copyInto(ids, start, end, ptr >>> 2);
    return ptr;
  }

  /** Room for `bytes` bytes of results (hashes) or raw input. */
  byteSpace(bytes: number): number {
    return this.byteArea.ensure(bytes);
  }
}

/** The staging areas of the plain (single-threaded) core. */
export const plainStaging = new Staging(growing, mem);

/** Copies tokens into the plain core's memory; returns their byte pointer (16 writable bytes before it). */
export function stageTokens(tokens: ArrayLike<number>, start = 0, end = tokens.length): number {
  return plainStaging.stageTokens(tokens, start, end);
}

/** Room for `n` int32 ids in the plain core. */
export function idSpace(n: number): number {
  return plainStaging.idSpace(n);
}

/** Copies ids into the plain core's memory; returns their byte pointer. */
export function stageIds(ids: ArrayLike<number>, start = 0, end = ids.length): number {
  return plainStaging.stageIds(ids, start, end);
}

/** Room for `bytes` bytes in the plain core. */
export function byteSpace(bytes: number): number {
  return plainStaging.byteSpace(bytes);
}
