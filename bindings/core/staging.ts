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
import { HeldPrompts, type HeldPrompt } from './held-prompts.js';

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
  private readonly held: HeldPrompts;

  constructor(private readonly mem: StagingMemory) {
    this.tokenArea = new Area(1 << 16, mem, 'tokens');
    this.idArea = new Area(1 << 14, mem, 'block ids');
    this.byteArea = new Area(1 << 12, mem, 'bytes');
    this.held = new HeldPrompts(mem);
  }

  /** Gives every area's region back to the core (a thread leaving a shared memory). */
  release(): void {
    this.tokenArea.release();
    this.idArea.release();
    this.byteArea.release();
    this.held.release();
  }

  /**
   * Room for `n` tokens that the core is about to write and that stand for
   * `src[0, n)` (the replay's prompts: the core writes each once). Until
   * dropPrompt(src), a stageTokens of `src` starting inside [0, n) reads
   * them here instead of copying `src` (tokens past `n` are copied in behind
   * them). `room`: tokens `src` may come to hold, reserved now. The caller
   * makes sure nothing writes `src[0, n)` in between: the held tokens are
   * what every staging of them gives, whatever `src` holds.
   */
  holdPrompt(src: Int32Array, n: number, room = n): number {
    this.dropPrompt(src);
    return this.held.ptr(this.held.add(src, n, room));
  }

  /** Ends holdPrompt's promise for `src` (if it holds one): its stagings copy again. */
  dropPrompt(src: Int32Array): void {
    this.held.drop(src);
  }

  /** Ends every hold. */
  dropPrompts(): void {
    this.held.dropAll();
  }

  /** Prompts held now. */
  get heldPrompts(): number {
    return this.held.count;
  }

  /** Audit of the held prompts (tests): throws when one lies outside their ring or over another. */
  checkHeld(): void {
    this.held.check();
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
    if (this.held.count > 0 && start >= 0 && start < end) {
      const h = this.held.of(tokens);
      if (h !== null && start < h.end) return this.stageHeld(h, start, end);
    }
    const ptr = this.tokenArea.ensure((end - start) * 4);
    this.copyInto(tokens, start, end, ptr >>> 2);
    return ptr;
  }

  /** Tokens [start, end) of a held prompt's array, `start` inside the held part. */
  private stageHeld(h: HeldPrompt, start: number, end: number): number {
    // The 16 bytes before `start` are a gap left free or earlier tokens:
    // writable either way, and the core puts back what it borrows there.
    if (end <= h.end) return this.held.ptr(h) + start * 4;
    // Tokens past the prompt (a sequence's outputs) come from the array, behind the held ones.
    const base = this.held.reserve(h, end);
    this.copyInto(h.tokens, h.end, end, (base >>> 2) + h.end);
    return base + start * 4;
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
