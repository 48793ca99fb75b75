// The whole mutable state of an XTensor manager (block manager and page
// allocator) as flat typed arrays over one buffer, so that the buffer can be
// a SharedArrayBuffer that several threads run one manager over
// (xtensor-concurrent-block-manager-impl.ts). Nothing mutable lives in
// JavaScript objects; what each thread keeps beside the buffer (the page of
// each id, each page's block range) is derived from the shape alone.
//
// Layout (int32 words unless noted):
//   header   magic, generation and lock at the offsets every shared object
//            header uses (core/abi.ts), the layout version, the shape, the
//            scalar state; then float64 words for the figures that may
//            exceed int32 (byte sizes, physical pages, counters)
//   ref      holders of each id                                  [numBlocks]
//   ring     free ids of each page in use, page p's queue in
//            slots [first(p), first(p) + count(p))               [numBlocks]
//   resIds   the reserved ids, a FIFO ring                       [numBlocks]
//   per page queue head, queue length, block-manager state
//            (none / avail / full), allocator-allocated flag     [4 x V]
//   freePages, resPages  the allocator's FIFO rings of pages     [2 x V]
//   availBits  pages with free ids, one bit each                 [ceil(V/32)]
//   events   map (+page+1) / unmap (-page-1) ring                [eventCapacity]

import { HDR_GEN, HDR_LOCK, HDR_MAGIC } from '../core/abi.js';

/** The parsed options a state is made for: everything the layout depends on. */
export interface XTensorShape {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly pageSize: number;
  readonly blockBytes: number;
  readonly numLayers: number;
  readonly numPhysicalPages: number;
  readonly minReserved: number;
  readonly maxReserved: number;
  readonly dpRank: number;
  readonly eventCapacity: number;
  /** Physical pages one virtual page takes: a K and a V page per layer. */
  readonly physPerPage: number;
  /** Virtual pages [0, V) the tensors span (capped by the physical pages). */
  readonly virtualPages: number;
}

/** "kvpX": the magic word of an XTensor state. */
export const XT_MAGIC = 0x5870766b;
/** Bumped whenever the layout below changes: a buffer of another layout is refused. */
export const XT_LAYOUT = 1;

// ---- int32 header words ----
export const W_MAGIC = HDR_MAGIC >>> 2;
export const W_GEN = HDR_GEN >>> 2;
/** First of the two lock words (owner, depth): header offset HDR_LOCK, as SharedLock expects. */
export const W_LOCK = HDR_LOCK >>> 2;
export const W_LAYOUT = 4;
export const W_NUM_BLOCKS = 5;
export const W_BLOCK_SIZE = 6;
export const W_NUM_LAYERS = 7;
export const W_MIN_RESERVED = 8;
export const W_MAX_RESERVED = 9;
export const W_DP_RANK = 10;
export const W_EVENT_CAPACITY = 11;
/** Free ids on pages in use (the avail pages' queues). */
export const W_NUM_AVAIL = 12;
export const W_PADDING = 13;
export const W_SLEEPING = 14;
export const W_RES_IDS_HEAD = 15;
export const W_RES_IDS_LEN = 16;
export const W_FREE_PAGES_HEAD = 17;
export const W_FREE_PAGES_LEN = 18;
export const W_RES_PAGES_HEAD = 19;
export const W_RES_PAGES_LEN = 20;
/** Pages the allocator has handed to the block manager. */
export const W_ALLOCATED_PAGES = 21;
export const W_EV_HEAD = 22;
export const W_EV_LEN = 23;
/** Blocks on the block manager's pages in use (the sum of their counts). */
export const W_IN_USE_BLOCKS = 24;
/** Blocks on the allocator's reserved (mapped, idle) pages. */
export const W_RES_PAGE_BLOCKS = 25;
const INT_WORDS = 32;

// ---- float64 header words (after the int32 ones) ----
export const F_PAGE_SIZE = INT_WORDS / 2;
export const F_BLOCK_BYTES = F_PAGE_SIZE + 1;
export const F_NUM_PHYSICAL = F_PAGE_SIZE + 2;
export const F_PHYS_FREE = F_PAGE_SIZE + 3;
export const F_BLOCKS_ALLOCATED = F_PAGE_SIZE + 4;
export const F_PEAK_USED = F_PAGE_SIZE + 5;
export const F_ALLOCATION_FAILURES = F_PAGE_SIZE + 6;
export const F_EVENTS_LOST = F_PAGE_SIZE + 7;
/** Bytes of the header. */
export const HEADER_BYTES = (F_PAGE_SIZE + 8) * 8;

/** Block-manager state of a page (pageState). */
export const PAGE_NONE = 0;
export const PAGE_AVAIL = 1;
export const PAGE_FULL = 2;

/** Bytes of the buffer a state of this shape needs. */
export function stateBytes(s: XTensorShape): number {
  const V = s.virtualPages;
  return HEADER_BYTES + 4 * (3 * s.numBlocks + 6 * V + Math.ceil(V / 32) + s.eventCapacity);
}

/** The block ids wholly inside page p, [first, end), capped at numBlocks. */
export function pageBlockRange(p: number, pageSize: number, blockBytes: number, numBlocks: number): [number, number] {
  const first = Math.ceil((p * pageSize) / blockBytes);
  const end = Math.min(numBlocks, Math.floor(((p + 1) * pageSize) / blockBytes));
  return [first, Math.max(first, end)];
}

export class XTensorState {
  readonly buffer: ArrayBuffer | SharedArrayBuffer;
  readonly i32: Int32Array;
  readonly f64: Float64Array;
  readonly ref: Int32Array;
  readonly ring: Int32Array;
  readonly resIds: Int32Array;
  readonly pageHead: Int32Array;
  readonly pageLen: Int32Array;
  readonly pageState: Int32Array;
  readonly pageAlloc: Int32Array;
  readonly freePages: Int32Array;
  readonly resPages: Int32Array;
  readonly availBits: Int32Array;
  readonly events: Int32Array;

  // Derived from the shape, the same in every thread (not state).
  /** Page of every usable id, -1 for ids that straddle two pages. */
  readonly pageOfId: Int32Array;
  /** First id and id count of every page (count 0: the page holds no whole block and is never used). */
  readonly pageFirst: Int32Array;
  readonly pageCount: Int32Array;
  /** The pages that hold at least one whole block, ascending. */
  readonly usablePages: Int32Array;

  /**
   * Views `buffer` (stateBytes(shape) long) as the state of `shape`; `init`
   * writes the header and the initial state (every usable page free).
   */
  constructor(readonly shape: XTensorShape, buffer: ArrayBuffer | SharedArrayBuffer, init: boolean) {
    const N = shape.numBlocks;
    const V = shape.virtualPages;
    if (buffer.byteLength !== stateBytes(shape)) throw new RangeError('kvpool: internal error: XTensor state buffer of the wrong size');
    this.buffer = buffer;
    this.i32 = new Int32Array(buffer, 0, INT_WORDS);
    this.f64 = new Float64Array(buffer, 0, HEADER_BYTES / 8);
    let at = HEADER_BYTES;
    const ints = (n: number) => {
      const v = new Int32Array(buffer, at, n);
      at += 4 * n;
      return v;
    };
    this.ref = ints(N);
    this.ring = ints(N);
    this.resIds = ints(N);
    this.pageHead = ints(V);
    this.pageLen = ints(V);
    this.pageState = ints(V);
    this.pageAlloc = ints(V);
    this.freePages = ints(V);
    this.resPages = ints(V);
    this.availBits = ints(Math.ceil(V / 32));
    this.events = ints(shape.eventCapacity);

    this.pageOfId = new Int32Array(N).fill(-1);
    this.pageFirst = new Int32Array(V);
    this.pageCount = new Int32Array(V);
    const usable: number[] = [];
    for (let p = 0; p < V; p++) {
      const [first, end] = pageBlockRange(p, shape.pageSize, shape.blockBytes, N);
      this.pageFirst[p] = first;
      if (end === first) continue;
      this.pageCount[p] = end - first;
      usable.push(p);
      this.pageOfId.fill(p, first, end);
    }
    this.usablePages = Int32Array.from(usable);
    if (init) this.init();
  }

  private init(): void {
    const s = this.shape;
    const i = this.i32;
    i[W_LAYOUT] = XT_LAYOUT;
    i[W_NUM_BLOCKS] = s.numBlocks;
    i[W_BLOCK_SIZE] = s.blockSize;
    i[W_NUM_LAYERS] = s.numLayers;
    i[W_MIN_RESERVED] = s.minReserved;
    i[W_MAX_RESERVED] = s.maxReserved;
    i[W_DP_RANK] = s.dpRank;
    i[W_EVENT_CAPACITY] = s.eventCapacity;
    const f = this.f64;
    f[F_PAGE_SIZE] = s.pageSize;
    f[F_BLOCK_BYTES] = s.blockBytes;
    f[F_NUM_PHYSICAL] = s.numPhysicalPages;
    f[F_PHYS_FREE] = s.numPhysicalPages;
    this.freePages.set(this.usablePages);
    i[W_FREE_PAGES_LEN] = this.usablePages.length;
    i[W_MAGIC] = XT_MAGIC; // last: the header says "XTensor state" only once it is one
  }

  /** The options recorded in a header, unchecked: the concurrent manager validates them before it attaches. */
  static rawShape(i32: Int32Array, f64: Float64Array) {
    return {
      numBlocks: i32[W_NUM_BLOCKS]!,
      blockSize: i32[W_BLOCK_SIZE]!,
      numLayers: i32[W_NUM_LAYERS]!,
      minReservedPages: i32[W_MIN_RESERVED]!,
      maxReservedPages: i32[W_MAX_RESERVED]!,
      dpRank: i32[W_DP_RANK]!,
      maxPendingEvents: i32[W_EVENT_CAPACITY]!,
      pageSize: f64[F_PAGE_SIZE]!,
      blockBytes: f64[F_BLOCK_BYTES]!,
      numPhysicalPages: f64[F_NUM_PHYSICAL]!,
    };
  }

  // ---- FIFO queues: `arr` holds the slots, header words hw and lw the head and length ----

  /** The `k`-th entry (0: the front) of the queue over `arr` with head word `hw`. */
  peek(arr: Int32Array, hw: number, k: number): number {
    const j = this.i32[hw]! + k;
    return arr[j >= arr.length ? j - arr.length : j]!;
  }

  /** Appends `v` (the queue has room: it never holds more than its slots). */
  push(arr: Int32Array, hw: number, lw: number, v: number): void {
    const i = this.i32;
    let j = i[hw]! + i[lw]!;
    if (j >= arr.length) j -= arr.length;
    arr[j] = v;
    i[lw]!++;
  }

  /** Takes the front entry off a non-empty queue. */
  shift(arr: Int32Array, hw: number, lw: number): number {
    const i = this.i32;
    const h = i[hw]!;
    i[hw] = h + 1 === arr.length ? 0 : h + 1;
    i[lw]!--;
    return arr[h]!;
  }

  /** The queue's entries, front first. */
  list(arr: Int32Array, hw: number, lw: number): number[] {
    const n = this.i32[lw]!;
    const out = new Array<number>(n);
    for (let k = 0; k < n; k++) out[k] = this.peek(arr, hw, k);
    return out;
  }
}
