// XTensorBlockManagerImpl: the scheduler-side model of xLLM's XTensor (see
// docs/xtensor.md). Block ids live on virtual pages of the KV tensors; a page
// is mapped to physical memory when the first block on it is needed and
// handed back to the rank's page allocator when its last block is freed.
// Pure TypeScript: there is no prefix cache and nothing per block that the
// Wasm core would speed up.
//
// Page p covers bytes [p*P, (p+1)*P) of every per-layer K/V tensor and owns
// exactly the blocks that lie wholly inside it, ids
// [ceil(p*P/Bm), floor((p+1)*P/Bm)); a block straddling two pages is never
// used, and neither is a page that holds no whole block.
//
// All mutable state is in one buffer of flat typed arrays (xtensor-state.ts):
// an ArrayBuffer here, a SharedArrayBuffer in the concurrent form
// (xtensor-concurrent-block-manager-impl.ts), where every thread runs this
// same code over the same state.

import { checkInt, checkInt32Array, checkKeys, checkObject, describe } from '../validate.js';
import type { BlockManagerStats } from './block-manager.js';
import type { PoolManager } from './pool-manager.js';
import { parseRecordOptions, type KVEvent, type RecordEventsOptions } from './kv-events.js';
import { BlockState } from './block-state.js';
import { PageAllocator, type PageEvent } from './xtensor-page-allocator.js';
import { noCaching, noSharedBlocks } from './no-prefix-cache.js';
import {
  F_ALLOCATION_FAILURES, F_BLOCKS_ALLOCATED, F_BLOCK_BYTES, F_NUM_PHYSICAL, F_PAGE_SIZE, F_PEAK_USED, F_PHYS_FREE, PAGE_AVAIL,
  PAGE_FULL, PAGE_NONE, W_ALLOCATED_PAGES, W_BLOCK_SIZE, W_DP_RANK, W_EVENT_CAPACITY, W_EV_HEAD, W_EV_LEN, W_FREE_PAGES_HEAD,
  W_FREE_PAGES_LEN, W_IN_USE_BLOCKS, W_LAYOUT, W_MAGIC, W_MAX_RESERVED, W_MIN_RESERVED, W_NUM_AVAIL, W_NUM_BLOCKS, W_NUM_LAYERS,
  W_PADDING, W_RES_IDS_HEAD, W_RES_IDS_LEN, W_RES_PAGES_HEAD, W_RES_PAGES_LEN, W_RES_PAGE_BLOCKS, W_SLEEPING, XTensorState,
  XT_LAYOUT, XT_MAGIC, pageBlockRange, stateBytes, type XTensorShape,
} from './xtensor-state.js';

export type { PageEvent } from './xtensor-page-allocator.js';
export { pageBlockRange } from './xtensor-state.js';

export interface XTensorBlockManagerOptions {
  /** Block ids, padding id 0 included (>= 2). */
  numBlocks: number;
  /** Tokens per block (>= 1). */
  blockSize: number;
  /** Bytes of a virtual page (the physical page granularity, e.g. 2 MiB). */
  pageSize: number;
  /** Bytes of one block in one layer's K (or V) tensor: blockSize * slotSize / 2. */
  blockBytes: number;
  numLayers: number;
  /** Physical pages the rank can map (default: enough to back every block). */
  numPhysicalPages?: number;
  /** Mapped idle pages kept ready (default 8). */
  minReservedPages?: number;
  /** Most mapped idle pages kept when pages are freed (default 32). */
  maxReservedPages?: number;
  /** The dp rank named in page events (default 0). */
  dpRank?: number;
  /**
   * Most page events kept until `takeEvents()` (default 4 per virtual page,
   * plus 64): when more come, the oldest are dropped and counted in
   * `eventsLost`. No single call records more than one per page.
   */
  maxPendingEvents?: number;
}

const KEYS = [
  'numBlocks', 'blockSize', 'pageSize', 'blockBytes', 'numLayers', 'numPhysicalPages', 'minReservedPages', 'maxReservedPages', 'dpRank',
  'maxPendingEvents',
] as const;

/** Validated options with the page layout derived from them. */
export function parseXTensorOptions(o: XTensorBlockManagerOptions, name = 'options'): XTensorShape {
  checkObject(name, o);
  checkKeys(name, o, KEYS);
  const numBlocks = checkInt(`${name}.numBlocks`, o.numBlocks, 2);
  const blockSize = checkInt(`${name}.blockSize`, o.blockSize, 1);
  const pageSize = checkInt(`${name}.pageSize`, o.pageSize, 1, Number.MAX_SAFE_INTEGER);
  const blockBytes = checkInt(`${name}.blockBytes`, o.blockBytes, 1, Number.MAX_SAFE_INTEGER);
  if (blockBytes > pageSize) {
    throw new RangeError(`${name}.blockBytes = ${blockBytes} is larger than ${name}.pageSize = ${pageSize}: no block fits on a page`);
  }
  const numLayers = checkInt(`${name}.numLayers`, o.numLayers, 1);
  const physPerPage = 2 * numLayers;
  const coverPages = Math.ceil((numBlocks * blockBytes) / pageSize);
  const numPhysicalPages = checkInt(`${name}.numPhysicalPages`, o.numPhysicalPages ?? coverPages * physPerPage, physPerPage, Number.MAX_SAFE_INTEGER);
  const minReserved = checkInt(`${name}.minReservedPages`, o.minReservedPages ?? 8);
  if (o.maxReservedPages === undefined && minReserved > 32) {
    throw new RangeError(`${name}.minReservedPages = ${minReserved} is more than maxReservedPages (32 by default); give maxReservedPages too`);
  }
  const maxReserved = checkInt(`${name}.maxReservedPages`, o.maxReservedPages ?? 32, minReserved);
  const dpRank = checkInt(`${name}.dpRank`, o.dpRank ?? 0);
  const virtualPages = Math.min(coverPages, Math.floor(numPhysicalPages / physPerPage));
  const eventCapacity = checkInt(`${name}.maxPendingEvents`, o.maxPendingEvents ?? Math.min(4 * virtualPages + 64, 0x7fffffff), 1);
  return { numBlocks, blockSize, pageSize, blockBytes, numLayers, physPerPage, numPhysicalPages, minReserved, maxReserved, dpRank, eventCapacity, virtualPages };
}

/**
 * @internal Where a manager's state lives: a new buffer from `alloc`
 * (initialized here), or the buffer of a live state to run over (attach).
 */
export type XTensorBacking = { alloc(bytes: number): ArrayBuffer | SharedArrayBuffer } | { attach: ArrayBuffer | SharedArrayBuffer };

const ownBuffer: XTensorBacking = { alloc: (bytes) => new ArrayBuffer(bytes) };

export class XTensorBlockManagerImpl implements PoolManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly pageSize: number;
  readonly blockBytes: number;
  readonly numLayers: number;
  readonly dpRank: number;
  /** @internal The state every call reads and writes (and nothing else). */
  protected readonly st: XTensorState;
  /** @internal */
  protected readonly allocator: PageAllocator;
  /** This handle's scratch for counting releases per id (zero between calls); not state. */
  private releases: Int32Array | null = null;
  private disposed = false;

  constructor(options: XTensorBlockManagerOptions, /** @internal */ backing: XTensorBacking = ownBuffer) {
    const shape = parseXTensorOptions(options);
    this.numBlocks = shape.numBlocks;
    this.blockSize = shape.blockSize;
    this.pageSize = shape.pageSize;
    this.blockBytes = shape.blockBytes;
    this.numLayers = shape.numLayers;
    this.dpRank = shape.dpRank;
    this.st = 'attach' in backing ? new XTensorState(shape, backing.attach, false) : new XTensorState(shape, backing.alloc(stateBytes(shape)), true);
    this.allocator = new PageAllocator(this.st);
  }

  /** For symmetry with the core-backed managers (nothing to load). */
  static async create(options: XTensorBlockManagerOptions): Promise<XTensorBlockManagerImpl> {
    return new XTensorBlockManagerImpl(options);
  }

  /**
   * The reference's blocks-per-page figure, floor(pageSize / blockBytes).
   * A page holds exactly `pageBlocks(p)` blocks, which can be one fewer
   * (a block straddling two pages is never used); kvpool counts those.
   */
  get blocksPerPage(): number {
    this.live();
    return Math.floor(this.pageSize / this.blockBytes);
  }

  /** The virtual page of block `id`, or -1 when the id is never used (it straddles pages). */
  pageOf(id: number): number {
    this.live();
    checkInt('id', id, 0, this.numBlocks - 1);
    return this.st.pageOfId[id]!;
  }

  /** The block ids on page `page`, [first, end) (empty for a page that holds no whole block). */
  pageBlocks(page: number): [number, number] {
    this.live();
    checkInt('page', page);
    const st = this.st;
    if (page >= st.shape.virtualPages || st.pageCount[page] === 0) return [0, 0];
    return [st.pageFirst[page]!, st.pageFirst[page]! + st.pageCount[page]!];
  }

  /**
   * Takes the padding block, which must come out as id 0 (maps page 0). Call
   * it once, before the first allocation (the reference does it after the KV
   * tensors exist).
   */
  reservePaddingBlocks(): void {
    this.live();
    const i = this.st.i32;
    if (i[W_PADDING] !== 0) throw new Error('kvpool: the padding block is already reserved');
    if (i[W_SLEEPING] !== 0) throw new Error('kvpool: the manager is asleep; wakeup() first');
    if (this.st.pageOfId[0] !== 0 || !this.canTake(1)) throw new Error('kvpool: page 0 cannot be mapped for the padding block');
    const got = new Int32Array(1);
    this.take(1, got, 0);
    // Nothing can be handed out before this call, so page 0's first id comes out.
    if (got[0] !== 0) throw new Error(`kvpool: internal error: the padding block came out as ${got[0]}, not 0`);
    i[W_PADDING] = 1;
  }

  allocate(n: number): Int32Array | null {
    this.live();
    checkInt('n', n);
    this.ready();
    const out = new Int32Array(n);
    return this.allocateInto(n, out, 0) ? out : null;
  }

  /** @internal `n` ids into dst[at..], all or nothing (false, nothing changed, when pages run out). */
  allocateInto(n: number, dst: Int32Array, at: number): boolean {
    this.live();
    this.ready();
    const st = this.st;
    if (!this.canTake(n)) {
      st.f64[F_ALLOCATION_FAILURES]!++;
      return false;
    }
    this.take(n, dst, at);
    const ref = st.ref;
    for (let i = at; i < at + n; i++) ref[dst[i]!] = 1;
    st.f64[F_BLOCKS_ALLOCATED]! += n;
    const used = this.usedBlocks();
    if (used > st.f64[F_PEAK_USED]!) st.f64[F_PEAK_USED] = used;
    return true;
  }

  deallocate(ids: ArrayLike<number>): void {
    this.live();
    const list = checkInt32Array('ids', ids);
    this.checkRelease(list, 0, list.length);
    for (let i = 0; i < list.length; i++) this.drop(list[i]!);
  }

  /** @internal Drops a reference on each of ids[start..end); 0, or -1 (nothing changed) when one has no holder. */
  releaseFrom(ids: Int32Array, start: number, end: number): number {
    this.live();
    if (this.releaseError(ids, start, end) >= 0) return -1;
    for (let i = start; i < end; i++) this.drop(ids[i]!);
    return 0;
  }

  retain(ids: ArrayLike<number>): void {
    this.live();
    const list = checkInt32Array('ids', ids);
    for (let i = 0; i < list.length; i++) this.checkHeldId(list[i]!, `ids[${i}]`);
    for (let i = 0; i < list.length; i++) this.st.ref[list[i]!]!++;
  }

  /** @internal */
  retainFrom(ids: Int32Array, start: number, end: number): number {
    this.live();
    const ref = this.st.ref;
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      if (!(id > 0 && id < this.numBlocks && ref[id]! > 0)) return -1;
    }
    for (let i = start; i < end; i++) ref[ids[i]!]!++;
    return 0;
  }

  /** No prefix cache: nothing is ever shared. */
  allocateShared(tokens: ArrayLike<number>, existingShared: ArrayLike<number> = []): Int32Array {
    this.live();
    return noSharedBlocks(tokens, existingShared);
  }

  cache(tokens: ArrayLike<number>, ids: ArrayLike<number>, existingSharedCount = 0): number {
    this.live();
    return noCaching(tokens, ids, existingSharedCount);
  }

  evict(n: number): number {
    this.live();
    checkInt('n', n);
    return 0;
  }

  /** @internal no prefix cache */
  matchInto(): number {
    this.live();
    return 0;
  }

  /** @internal no prefix cache */
  insertFrom(): number {
    this.live();
    return 0;
  }

  /**
   * Takes `k` blocks aside; later allocations hand them out first. False
   * (nothing changed) when fewer than `k` can be had.
   */
  tryToReserve(k: number): boolean {
    this.live();
    checkInt('k', k);
    this.ready();
    if (!this.canTake(k)) return false;
    // Taken first and appended after, so reserved ids already held come round again last.
    const got = new Int32Array(k);
    this.take(k, got, 0);
    for (let j = 0; j < k; j++) this.st.push(this.st.resIds, W_RES_IDS_HEAD, W_RES_IDS_LEN, got[j]!);
    return true;
  }

  /** Gives the reserved blocks back to their pages. */
  freeReserved(): void {
    this.live();
    const st = this.st;
    while (st.i32[W_RES_IDS_LEN]! > 0) this.freeId(st.shift(st.resIds, W_RES_IDS_HEAD, W_RES_IDS_LEN));
  }

  /** Unmaps every reserved (mapped, idle) page. */
  trim(): void {
    this.live();
    this.allocator.trim();
  }

  /** Unmaps every mapped page, keeping which pages are reserved and allocated. */
  sleep(): void {
    this.live();
    this.allocator.sleep();
  }

  /** Maps again the pages sleep() unmapped. */
  wakeup(): void {
    this.live();
    this.allocator.wakeup();
  }

  get sleeping(): boolean {
    this.live();
    return this.allocator.sleeping;
  }

  /** Map/unmap events since the last call, oldest first (in the concurrent form: whichever thread takes them). */
  takeEvents(): PageEvent[] {
    this.live();
    return this.allocator.takeEvents();
  }

  /**
   * Page events dropped so far because more than `maxPendingEvents` were
   * waiting: a consumer that sees it grow has missed changes and should
   * rebuild its view of the mapped pages from `pageStates()`.
   */
  get eventsLost(): number {
    this.live();
    return this.allocator.eventsLost;
  }

  /** Pages by state: free (unmapped), reserved (mapped, idle), allocated (holding blocks). */
  pageStates(): { free: number[]; reserved: number[]; allocated: number[] } {
    this.live();
    const a = this.allocator;
    return { free: a.freeList(), reserved: a.reservedList(), allocated: a.allocatedList() };
  }

  // ---- figures (with exact per-page block counts) ----

  /** Free blocks on pages in use, reserved blocks, and every block on reserved mapped pages. */
  numFreeBlocks(): number {
    this.live();
    const i = this.st.i32;
    return i[W_NUM_AVAIL]! + i[W_RES_IDS_LEN]! + i[W_RES_PAGE_BLOCKS]!;
  }

  /** Blocks handed out from pages (the padding block included), reserved blocks excluded. */
  numUsedBlocks(): number {
    this.live();
    return this.usedBlocks();
  }

  numBlocksInPrefixCache(): number {
    this.live();
    return 0;
  }

  /** The option `numBlocks` (the reference counts the padding block here). */
  numTotalBlocks(): number {
    this.live();
    return this.numBlocks;
  }

  kvCacheUtilization(): number {
    this.live();
    return this.usedBlocks() / this.numBlocks;
  }

  stats(): BlockManagerStats {
    this.live();
    const f = this.st.f64;
    return {
      numFreeBlocks: this.numFreeBlocks(),
      numUsedBlocks: this.usedBlocks(),
      numBlocksInPrefixCache: 0,
      numTotalBlocks: this.numBlocks,
      numEvictableBlocks: 0,
      matchCalls: 0,
      blocksQueried: 0,
      blocksHit: 0,
      blocksInserted: 0,
      blocksEvicted: 0,
      blocksAllocated: f[F_BLOCKS_ALLOCATED]!,
      allocationFailures: f[F_ALLOCATION_FAILURES]!,
      peakUsedBlocks: f[F_PEAK_USED]!,
    };
  }

  /** XTensor blocks are never cached, so they carry no hash. */
  blockHash(id: number): Uint8Array | null {
    this.live();
    checkInt('id', id, 0, this.numBlocks - 1);
    return null;
  }

  /** Nothing is ever stored in or removed from a prefix cache here: no events. */
  recordEvents(on: boolean, options?: RecordEventsOptions): void {
    this.live();
    if (typeof on !== 'boolean') throw new TypeError(`on must be a boolean, got ${describe(on)}`);
    parseRecordOptions(options);
  }

  drainEvents(_dpRank = 0, out: KVEvent[] = []): KVEvent[] {
    this.live();
    return out;
  }

  /** @internal No records, ever. */
  drainEventRecords(): void {
    this.live();
  }

  /** @internal No records, ever. */
  snapshotEventRecords(): void {
    this.live();
  }

  resetPrefixCache(): number {
    this.live();
    return 0;
  }

  /** References held on `id` by callers. */
  refCount(id: number): number {
    this.live();
    checkInt('id', id, 0, this.numBlocks - 1);
    return this.st.ref[id]!;
  }

  /** Holders of every id (index = id); for audits. */
  holderCounts(): Int32Array {
    this.live();
    return this.st.ref.slice();
  }

  /** Every id's BlockState code (no prefix cache here: free, held, shared, padding). */
  blockStates(out?: Uint8Array): Uint8Array {
    this.live();
    const n = this.numBlocks;
    if (out !== undefined && (!(out instanceof Uint8Array) || out.length < n)) {
      throw new TypeError(`out must be a Uint8Array of length >= ${n}, got ${out instanceof Uint8Array ? `one of length ${out.length}` : describe(out)}`);
    }
    const dst = out ?? new Uint8Array(n);
    const ref = this.st.ref;
    for (let id = 0; id < n; id++) {
      const h = ref[id]!;
      dst[id] = id === 0 ? BlockState.Padding : h > 1 ? BlockState.Shared : h === 1 ? BlockState.Held : BlockState.Free;
    }
    return dst;
  }

  /** Free ids of the pages in use, by page ascending, each page's next id first. */
  freeIds(): Int32Array {
    this.live();
    const st = this.st;
    const out = new Int32Array(st.i32[W_NUM_AVAIL]!);
    let k = 0;
    for (let p = 0; p < st.shape.virtualPages; p++) {
      if (st.pageState[p] !== PAGE_AVAIL) continue;
      for (let j = 0; j < st.pageLen[p]!; j++) out[k++] = this.pageQueueAt(p, j);
    }
    return out;
  }

  lruOrder(): Int32Array {
    this.live();
    return new Int32Array(0);
  }

  /** Forgets the manager: every call afterwards throws (it holds no Wasm memory). */
  dispose(): void {
    this.disposed = true;
  }

  /** True once `dispose()` ran. */
  get isDisposed(): boolean {
    return this.disposed;
  }

  /** @internal Throws once the manager is disposed (every public call starts here). */
  live(): void {
    if (this.disposed) throw new Error('kvpool: this XTensorBlockManagerImpl was disposed; it cannot be used any more');
  }

  /** Audits the whole state: every list, queue, counter and holder count against the others. */
  check(): void {
    this.live();
    const st = this.st;
    const { shape } = st;
    const i = st.i32;
    const f = st.f64;
    const V = shape.virtualPages;
    const fail = (msg: string): never => {
      throw new Error(`kvpool: XTensor state is inconsistent: ${msg}`);
    };
    if (i[W_MAGIC] !== XT_MAGIC || i[W_LAYOUT] !== XT_LAYOUT) fail('the header is damaged');
    const words: Array<[number, number]> = [
      [i[W_NUM_BLOCKS]!, shape.numBlocks], [i[W_BLOCK_SIZE]!, shape.blockSize], [i[W_NUM_LAYERS]!, shape.numLayers],
      [i[W_MIN_RESERVED]!, shape.minReserved], [i[W_MAX_RESERVED]!, shape.maxReserved], [i[W_DP_RANK]!, shape.dpRank],
      [i[W_EVENT_CAPACITY]!, shape.eventCapacity], [f[F_PAGE_SIZE]!, shape.pageSize], [f[F_BLOCK_BYTES]!, shape.blockBytes],
      [f[F_NUM_PHYSICAL]!, shape.numPhysicalPages],
    ];
    if (words.some(([a, b]) => a !== b)) fail('the shape in the header changed');
    const queue = (what: string, arr: Int32Array, hw: number, lw: number): number[] => {
      if (!(i[hw]! >= 0 && i[hw]! < arr.length && i[lw]! >= 0 && i[lw]! <= arr.length)) fail(`the ${what} queue's head or length is out of range`);
      return st.list(arr, hw, lw);
    };

    // The allocator: every usable page in exactly one of its three states.
    const a = this.allocator;
    const state = new Map<number, string>();
    const allocated = a.allocatedList();
    for (const [list, what] of [[queue('free page', st.freePages, W_FREE_PAGES_HEAD, W_FREE_PAGES_LEN), 'free'], [queue('reserved page', st.resPages, W_RES_PAGES_HEAD, W_RES_PAGES_LEN), 'reserved'], [allocated, 'allocated']] as const) {
      for (const p of list) {
        if (!(p >= 0 && p < V && st.pageCount[p]! > 0)) fail(`page ${p} holds no block but is ${what}`);
        if (state.has(p)) fail(`page ${p} is both ${state.get(p)} and ${what}`);
        state.set(p, what);
      }
    }
    if (state.size !== st.usablePages.length) fail('a usable page is in no allocator list');
    if (i[W_ALLOCATED_PAGES] !== allocated.length) fail('the allocated-page count is wrong');
    const reserved = a.reservedList();
    if (reserved.length > Math.max(shape.maxReserved, shape.minReserved)) fail('more reserved pages than the maximum');
    if (i[W_RES_PAGE_BLOCKS] !== reserved.reduce((n, p) => n + st.pageCount[p]!, 0)) fail('the reserved-page block count is wrong');
    if (i[W_SLEEPING] !== 0 && i[W_SLEEPING] !== 1) fail('the sleeping flag is damaged');
    const mapped = a.sleeping ? 0 : reserved.length + allocated.length;
    const physExpected = shape.numPhysicalPages - mapped * shape.physPerPage;
    if (f[F_PHYS_FREE] !== physExpected) fail(`physical pages free ${f[F_PHYS_FREE]}, expected ${physExpected}`);

    // The block manager's pages in use: the allocated pages, each with its free-id queue.
    const isFree = new Uint8Array(this.numBlocks);
    let avail = 0;
    let inUseBlocks = 0;
    for (let p = 0; p < V; p++) {
      const s = st.pageState[p]!;
      const count = st.pageCount[p]!;
      const len = st.pageLen[p]!;
      const bit = (st.availBits[p >>> 5]! >>> (p & 31)) & 1;
      if (s !== PAGE_NONE && s !== PAGE_AVAIL && s !== PAGE_FULL) fail(`page ${p} has the unknown state ${s}`);
      if ((s !== PAGE_NONE) !== (st.pageAlloc[p] !== 0)) fail('pages in use differ from the allocated pages');
      if (bit !== (s === PAGE_AVAIL ? 1 : 0)) fail(`page ${p}'s bit in the avail set is wrong`);
      if (s === PAGE_NONE) {
        if (len !== 0) fail(`page ${p} is not in use but lists free ids`);
        continue;
      }
      if (s === PAGE_FULL ? len !== 0 : len === 0 || len >= count) fail(`page ${p} is in the wrong list`);
      if (!(st.pageHead[p]! >= 0 && st.pageHead[p]! < count)) fail(`page ${p}'s queue head is out of range`);
      for (let j = 0; j < len; j++) {
        const id = this.pageQueueAt(p, j);
        if (st.pageOfId[id] !== p || isFree[id]) fail(`page ${p} lists free id ${id} wrongly`);
        isFree[id] = 1;
      }
      if (s === PAGE_AVAIL) avail += len;
      inUseBlocks += count;
    }
    if ((V & 31) !== 0 && st.availBits[V >>> 5]! >>> (V & 31) !== 0) fail('the avail set has bits past the last page');
    if (avail !== i[W_NUM_AVAIL]) fail('the available-block count is wrong');
    if (inUseBlocks !== i[W_IN_USE_BLOCKS]) fail('the in-use block count is wrong');

    // Reserved ids and holders.
    const isReserved = new Uint8Array(this.numBlocks);
    for (const id of queue('reserved id', st.resIds, W_RES_IDS_HEAD, W_RES_IDS_LEN)) {
      if (!(id >= 0 && id < this.numBlocks)) fail(`reserved id ${id} is out of range`);
      if (isReserved[id]) fail(`block ${id} is reserved twice`);
      isReserved[id] = 1;
    }
    if (i[W_PADDING] !== 0 && i[W_PADDING] !== 1) fail('the padding flag is damaged');
    for (let id = 0; id < this.numBlocks; id++) {
      const p = st.pageOfId[id]!;
      const onPage = p >= 0 && st.pageState[p] !== PAGE_NONE;
      const taken = onPage && !isFree[id];
      const padding = id === 0 && i[W_PADDING] === 1;
      const r = st.ref[id]!;
      const holders = r + isReserved[id]! + (padding ? 1 : 0);
      if (r < 0 || holders > 0 !== taken || (taken && r > 0 && isReserved[id]!) || (padding && r > 0)) {
        fail(`block ${id} is ${taken ? 'handed out' : 'not handed out'} but has ${r} holders${isReserved[id] ? ' and is reserved' : ''}`);
      }
    }

    // Events and counters.
    for (const e of queue('event', st.events, W_EV_HEAD, W_EV_LEN)) {
      const p = e > 0 ? e - 1 : -e - 1;
      if (!(p >= 0 && p < V && st.pageCount[p]! > 0)) fail(`an event names page ${p}, which holds no block`);
    }
    // Only allocations raise the peak, so before the first one it trails the padding block.
    const peakFloor = f[F_BLOCKS_ALLOCATED] === 0 && f[F_PEAK_USED] === 0 ? 0 : this.usedBlocks();
    if (f[F_PEAK_USED]! < peakFloor) fail('the peak of used blocks is below the blocks used now');
  }

  // ---- internals ----

  private ready(): void {
    const i = this.st.i32;
    if (i[W_PADDING] === 0) throw new Error('kvpool: reservePaddingBlocks() must be called before the first allocation');
    if (i[W_SLEEPING] !== 0) throw new Error('kvpool: the manager is asleep; wakeup() first');
  }

  private usedBlocks(): number {
    const i = this.st.i32;
    return i[W_IN_USE_BLOCKS]! - i[W_NUM_AVAIL]! - i[W_RES_IDS_LEN]!;
  }

  /** The `j`-th free id (0: the next handed out) of page `p` in use. */
  private pageQueueAt(p: number, j: number): number {
    const st = this.st;
    const count = st.pageCount[p]!;
    let k = st.pageHead[p]! + j;
    if (k >= count) k -= count;
    return st.ring[st.pageFirst[p]! + k]!;
  }

  /** True when `n` blocks can be had: reserved blocks, free blocks on pages in use, then new pages. */
  private canTake(n: number): boolean {
    const i = this.st.i32;
    const have = i[W_RES_IDS_LEN]! + i[W_NUM_AVAIL]!;
    return have >= n || this.allocator.canSupply(n - have);
  }

  /** The lowest page in use with a free id, or -1. */
  private lowestAvail(): number {
    const bits = this.st.availBits;
    for (let w = 0; w < bits.length; w++) {
      const b = bits[w]!;
      if (b !== 0) return 32 * w + 31 - Math.clz32(b & -b);
    }
    return -1;
  }

  private setAvail(p: number, on: boolean): void {
    const bits = this.st.availBits;
    if (on) bits[p >>> 5]! |= 1 << (p & 31);
    else bits[p >>> 5]! &= ~(1 << (p & 31));
  }

  /** Hands out `n` ids into dst[at..] (canTake(n) holds): reserved first, then the lowest page with free blocks. */
  private take(n: number, dst: Int32Array, at: number): void {
    const st = this.st;
    const i = st.i32;
    let k = 0;
    while (k < n && i[W_RES_IDS_LEN]! > 0) dst[at + k++] = st.shift(st.resIds, W_RES_IDS_HEAD, W_RES_IDS_LEN);
    while (k < n) {
      let p = this.lowestAvail();
      if (p < 0) {
        p = this.allocator.allocPage();
        const count = st.pageCount[p]!;
        const first = st.pageFirst[p]!;
        for (let j = 0; j < count; j++) st.ring[first + j] = first + j;
        st.pageHead[p] = 0;
        st.pageLen[p] = count;
        st.pageState[p] = PAGE_AVAIL;
        this.setAvail(p, true);
        i[W_NUM_AVAIL]! += count;
        i[W_IN_USE_BLOCKS]! += count;
      }
      const count = st.pageCount[p]!;
      const first = st.pageFirst[p]!;
      let head = st.pageHead[p]!;
      const m = Math.min(n - k, st.pageLen[p]!);
      for (let j = 0; j < m; j++) {
        dst[at + k++] = st.ring[first + head]!;
        if (++head === count) head = 0;
      }
      st.pageHead[p] = head;
      st.pageLen[p]! -= m;
      i[W_NUM_AVAIL]! -= m;
      if (st.pageLen[p] === 0) {
        st.pageState[p] = PAGE_FULL;
        this.setAvail(p, false);
      }
    }
  }

  /** The last holder let go: the id goes back to its page; an emptied page goes back to the allocator. */
  private freeId(id: number): void {
    const st = this.st;
    const i = st.i32;
    const p = st.pageOfId[id]!;
    const count = st.pageCount[p]!;
    const wasFull = st.pageState[p] === PAGE_FULL;
    let slot = st.pageHead[p]! + st.pageLen[p]!;
    if (slot >= count) slot -= count;
    st.ring[st.pageFirst[p]! + slot] = id;
    const len = ++st.pageLen[p]!;
    if (len === count) {
      st.pageState[p] = PAGE_NONE;
      st.pageLen[p] = 0;
      st.pageHead[p] = 0;
      this.setAvail(p, false);
      i[W_NUM_AVAIL]! -= count - 1;
      i[W_IN_USE_BLOCKS]! -= count;
      this.allocator.freePage(p);
      return;
    }
    i[W_NUM_AVAIL]!++;
    if (wasFull) {
      st.pageState[p] = PAGE_AVAIL;
      this.setAvail(p, true);
    }
  }

  private drop(id: number): void {
    if (--this.st.ref[id]! === 0) this.freeId(id);
  }

  private checkHeldId(id: number, at: string): void {
    if (id === 0) throw new RangeError(`${at} = 0 is the padding block, which is never handed out`);
    if (!(id > 0 && id < this.numBlocks)) throw new RangeError(`${at} = ${id} is out of range: this manager's ids are 1..${this.numBlocks - 1}`);
    if (this.st.ref[id] === 0) throw new RangeError(`${at} = ${id} has no holder left (it is free)`);
  }

  /** Every listed release must have a holder left, duplicates counted. */
  private checkRelease(ids: ArrayLike<number>, start: number, end: number): void {
    const bad = this.releaseError(ids, start, end);
    if (bad < 0) return;
    const id = ids[bad]!;
    this.checkHeldId(id, `ids[${bad}]`);
    throw new RangeError(`ids[${bad}] = ${id} has no holder left (it is released more times than held)`);
  }

  /** The first index of ids[start..end) whose release has no holder left (duplicates counted), or -1. */
  private releaseError(ids: ArrayLike<number>, start: number, end: number): number {
    const ref = this.st.ref;
    const n = this.numBlocks;
    const seen = (this.releases ??= new Int32Array(n));
    let bad = -1;
    let i = start;
    for (; i < end; i++) {
      const id = ids[i]!;
      if (!(id > 0 && id < n) || ++seen[id]! > ref[id]!) {
        bad = i;
        break;
      }
    }
    // Leave the scratch zero for the next call.
    for (let j = start; j < i; j++) seen[ids[j]!] = 0;
    if (bad >= 0 && ids[bad]! > 0 && ids[bad]! < n) seen[ids[bad]!] = 0;
    return bad;
  }
}
