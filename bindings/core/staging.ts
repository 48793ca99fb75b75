// Staging areas in linear memory: how arrays cross the JS/Wasm boundary.
// A call copies its tokens/ids into one of these areas with a single
// TypedArray.set, passes the pointer, and reads results from the same place.
// Areas only grow (doubling), so steady-state calls allocate nothing.
// Each core instance has its own areas (a shared-memory instance: one set
// per thread, so threads never stage into the same bytes).
//
// Every size is checked here, in JS numbers, before anything is allocated:
// a request the core could never hold is a RangeError, and no size can wrap
// on its way into the core's u32 parameters.

import { MAX_REGION_BYTES, STAGING_HEADROOM } from './abi.js';
import type { MemViews } from './views.js';

/** What staging needs of its core instance. */
export interface StagingMemory extends MemViews {
  /** A region of `bytes` bytes (unsigned pointer), 0 when memory is exhausted. */
  alloc(bytes: number): number;
  release(ptr: number): void;
  /** Throws when the instance can no longer be used. */
  live(): void;
}

/** Bytes kept writable in front of every area (a parent hash goes right before a block's tokens). */
export const HEADROOM = STAGING_HEADROOM;

/** The largest area, in bytes. */
export const MAX_STAGING_BYTES = MAX_REGION_BYTES - HEADROOM;

class Area {
  private region = 0;
  private capacity = 0; // bytes usable after the headroom

  constructor(
    private readonly initial: number,
    private readonly rt: StagingMemory,
    private readonly what: string,
  ) {}

  /** Byte pointer of an area holding at least `bytes` bytes. */
  ensure(bytes: number): number {
    if (bytes > this.capacity) this.grow(bytes);
    return this.region + HEADROOM;
  }

  /** Gives the region back (the area starts over empty). */
  release(): void {
    if (this.region !== 0) this.rt.release(this.region);
    this.region = 0;
    this.capacity = 0;
  }

  private grow(bytes: number): void {
    this.rt.live();
    if (!(bytes <= MAX_STAGING_BYTES)) {
      throw new RangeError(
        `kvpool: cannot stage ${bytes} bytes of ${this.what} in Wasm memory (at most ${MAX_STAGING_BYTES}); ` +
          'the request is too large for a 32-bit core',
      );
    }
    let cap = Math.max(this.initial, this.capacity * 2);
    while (cap < bytes) cap *= 2;
    if (cap > MAX_STAGING_BYTES) cap = bytes;
    const region = this.rt.alloc(cap + HEADROOM);
    if (region === 0) {
      throw new RangeError(`kvpool: Wasm memory exhausted while staging ${bytes} bytes of ${this.what}`);
    }
    if (this.region !== 0) this.rt.release(this.region);
    this.region = region;
    this.capacity = cap;
  }
}

/** The staging areas of one core instance. */
export class Staging {
  private readonly tokenArea: Area;
  private readonly idArea: Area;
  private readonly byteArea: Area;
  private readonly promptArea: Area;
  /** The array whose tokens [0, promptEnd) sit in the prompt area (holdPrompt), or null. */
  private prompt: Int32Array | null = null;
  private promptEnd = 0;

  constructor(private readonly mem: StagingMemory) {
    this.tokenArea = new Area(1 << 16, mem, 'tokens');
    this.idArea = new Area(1 << 14, mem, 'block ids');
    this.byteArea = new Area(1 << 12, mem, 'bytes');
    this.promptArea = new Area(1 << 12, mem, 'prompt tokens');
  }

  /** Gives every area's region back to the core (a thread leaving a shared memory). */
  release(): void {
    this.dropPrompt();
    this.tokenArea.release();
    this.idArea.release();
    this.byteArea.release();
    this.promptArea.release();
  }

  /**
   * Room for `n` tokens that the core is about to write and `src[0, n)` will
   * hold too (the replay's prompts: the core writes them, they are copied
   * out once). Until dropPrompt(), stageTokens of `src` within [0, n)
   * returns their place here instead of copying them in again. The caller
   * makes sure nothing writes `src[0, n)` in between.
   */
  holdPrompt(src: Int32Array, n: number): number {
    this.prompt = null;
    const p = this.promptArea.ensure(n * 4);
    this.prompt = src;
    this.promptEnd = n;
    return p;
  }

  /** Ends holdPrompt's promise: every stageTokens copies again. */
  dropPrompt(): void {
    this.prompt = null;
    this.promptEnd = 0;
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
    // Inside the held prompt, the 16 bytes before `start` are the area's
    // headroom or earlier tokens: writable either way, and the core puts
    // back what it borrows there.
    if (tokens === this.prompt && start >= 0 && start < end && end <= this.promptEnd) return this.promptArea.ensure(0) + start * 4;
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

  /** Copies bytes into the byte area; returns their pointer. */
  stageBytes(bytes: Uint8Array): number {
    const p = this.byteArea.ensure(bytes.length);
    this.mem.u8.set(bytes, p);
    return p;
  }
}
