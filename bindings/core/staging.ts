// Staging areas in linear memory: how arrays cross the JS/Wasm boundary.
// A call copies its tokens/ids into one of these areas with a single
// TypedArray.set, passes the pointer, and reads results from the same place.
// Areas only grow (doubling), so steady-state calls allocate nothing.

import { growing, mem } from './instance.js';

/**
 * Bytes kept writable in front of every area: chained block hashing puts the
 * parent's 16-byte hash right before a block's tokens (and restores them).
 */
export const HEADROOM = 16;

class Area {
  private region = 0;
  private capacity = 0; // bytes usable after the headroom

  constructor(private readonly initial: number) {}

  /** Byte pointer of an area holding at least `bytes` bytes. */
  ensure(bytes: number): number {
    if (bytes > this.capacity) this.grow(bytes);
    return this.region + HEADROOM;
  }

  private grow(bytes: number): void {
    let cap = Math.max(this.initial, this.capacity * 2);
    while (cap < bytes) cap *= 2;
    const region = growing((e) => e.alloc(cap + HEADROOM));
    if (region === 0) {
      throw new RangeError(`kvpool: Wasm memory exhausted while staging ${bytes} bytes`);
    }
    if (this.region !== 0) growing((e) => e.release(this.region));
    this.region = region;
    this.capacity = cap;
  }
}

const tokenArea = new Area(1 << 16);
const idArea = new Area(1 << 14);
const byteArea = new Area(1 << 12);

/** Copies src[start, end) to linear memory at int32 index `at` (TypedArray.set takes plain arrays too). */
function copyInto(src: ArrayLike<number>, start: number, end: number, at: number): void {
  const n = end - start;
  if (n <= 8) {
    const i32 = mem.i32;
    for (let i = 0; i < n; i++) i32[at + i] = src[start + i]!;
  } else if (src instanceof Int32Array) {
    mem.i32.set(start === 0 && end === src.length ? src : src.subarray(start, end), at);
  } else if (start === 0 && end === src.length) {
    mem.i32.set(src, at);
  } else {
    mem.i32.set(Array.prototype.slice.call(src, start, end) as number[], at);
  }
}

/** Copies tokens into linear memory; returns their byte pointer (16 writable bytes before it). */
export function stageTokens(tokens: ArrayLike<number>, start = 0, end = tokens.length): number {
  const ptr = tokenArea.ensure((end - start) * 4);
  copyInto(tokens, start, end, ptr >>> 2);
  return ptr;
}

/** Room for `n` int32 ids (to write into, or read back from). */
export function idSpace(n: number): number {
  return idArea.ensure(n * 4);
}

/** Copies ids into linear memory; returns their byte pointer. */
export function stageIds(ids: ArrayLike<number>, start = 0, end = ids.length): number {
  const ptr = idArea.ensure((end - start) * 4);
  copyInto(ids, start, end, ptr >>> 2);
  return ptr;
}

/** Room for `bytes` bytes of results (hashes) or raw input. */
export function byteSpace(bytes: number): number {
  return byteArea.ensure(bytes);
}
