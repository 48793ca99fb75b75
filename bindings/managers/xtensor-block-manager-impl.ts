// XTensorBlockManagerImpl (SEMANTICS A.10 and part E): the scheduler-side
// model of xLLM's XTensor. Block ids live on virtual pages of the KV tensors;
// a page is mapped to physical memory when the first block on it is needed
// and handed back to the rank's page allocator when its last block is freed.
// Pure TypeScript: there is no prefix cache and nothing per block that the
// Wasm core would speed up.
//
// Page p covers bytes [p*P, (p+1)*P) of every per-layer K/V tensor and owns
// exactly the blocks that lie wholly inside it, ids
// [ceil(p*P/Bm), floor((p+1)*P/Bm)); a block straddling two pages is never
// used, and neither is a page that holds no whole block.

import { checkInt, checkInt32Array, checkKeys, checkObject, describe } from '../validate.js';
import type { BlockManagerStats } from './block-manager.js';
import type { PoolManager } from './pool-manager.js';
import type { KVEvent } from './kv-events.js';
import { BlockState } from './block-state.js';
import { PageAllocator, type PageEvent } from './xtensor-page-allocator.js';
import { noCaching, noSharedBlocks } from './no-prefix-cache.js';

export type { PageEvent } from './xtensor-page-allocator.js';

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
}

const KEYS = [
  'numBlocks', 'blockSize', 'pageSize', 'blockBytes', 'numLayers', 'numPhysicalPages', 'minReservedPages', 'maxReservedPages', 'dpRank',
] as const;

/** Validated options with the page layout derived from them. */
export function parseXTensorOptions(o: XTensorBlockManagerOptions, name = 'options') {
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
  const maxReserved = checkInt(`${name}.maxReservedPages`, o.maxReservedPages ?? 32, minReserved);
  const dpRank = checkInt(`${name}.dpRank`, o.dpRank ?? 0);
  const virtualPages = Math.min(coverPages, Math.floor(numPhysicalPages / physPerPage));
  return { numBlocks, blockSize, pageSize, blockBytes, numLayers, physPerPage, numPhysicalPages, minReserved, maxReserved, dpRank, virtualPages };
}

/** The block ids wholly inside page p, [first, end), capped at numBlocks. */
export function pageBlockRange(p: number, pageSize: number, blockBytes: number, numBlocks: number): [number, number] {
  const first = Math.ceil((p * pageSize) / blockBytes);
  const end = Math.min(numBlocks, Math.floor(((p + 1) * pageSize) / blockBytes));
  return [first, Math.max(first, end)];
}

interface Page {
  readonly first: number;
  readonly count: number;
  /** Free ids of a page in use; handed out from the front, freed ones appended. */
  free: number[];
}

export class XTensorBlockManagerImpl implements PoolManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly pageSize: number;
  readonly blockBytes: number;
  readonly numLayers: number;
  readonly dpRank: number;
  /** @internal */
  readonly allocator: PageAllocator;
  /** Page of every usable id, -1 for straddling ids. */
  private readonly pageOfId: Int32Array;
  private readonly layout = new Map<number, { first: number; count: number }>();
  /** Pages holding handed-out blocks: with free blocks (avail) or none (full). */
  private readonly avail = new Map<number, Page>();
  private readonly full = new Map<number, Page>();
  private numAvail = 0;
  private readonly reserved: number[] = [];
  private readonly ref: Int32Array;
  private paddingReserved = false;
  private blocksAllocated = 0;
  private peakUsed = 0;
  private allocationFailures = 0;
  private disposed = false;

  constructor(options: XTensorBlockManagerOptions) {
    const o = parseXTensorOptions(options);
    this.numBlocks = o.numBlocks;
    this.blockSize = o.blockSize;
    this.pageSize = o.pageSize;
    this.blockBytes = o.blockBytes;
    this.numLayers = o.numLayers;
    this.dpRank = o.dpRank;
    this.pageOfId = new Int32Array(o.numBlocks).fill(-1);
    this.ref = new Int32Array(o.numBlocks);
    const pages: number[] = [];
    for (let p = 0; p < o.virtualPages; p++) {
      const [first, end] = pageBlockRange(p, o.pageSize, o.blockBytes, o.numBlocks);
      if (end === first) continue;
      pages.push(p);
      this.layout.set(p, { first, count: end - first });
      this.pageOfId.fill(p, first, end);
    }
    this.allocator = new PageAllocator({
      rank: o.dpRank,
      pageSize: o.pageSize,
      physPerPage: o.physPerPage,
      numPhysicalPages: o.numPhysicalPages,
      minReserved: o.minReserved,
      maxReserved: o.maxReserved,
      pages,
    });
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
    return this.pageOfId[id]!;
  }

  /** The block ids on page `page`, [first, end) (empty for a page that holds no whole block). */
  pageBlocks(page: number): [number, number] {
    this.live();
    checkInt('page', page);
    const l = this.layout.get(page);
    return l === undefined ? [0, 0] : [l.first, l.first + l.count];
  }

  /**
   * Takes the padding block, which must come out as id 0 (maps page 0). Call
   * it once, before the first allocation (the reference does it after the KV
   * tensors exist).
   */
  reservePaddingBlocks(): void {
    this.live();
    if (this.paddingReserved) throw new Error('kvpool: the padding block is already reserved');
    if (this.allocator.sleeping) throw new Error('kvpool: the manager is asleep; wakeup() first');
    if (this.pageOfId[0] !== 0 || !this.canTake(1)) throw new Error('kvpool: page 0 cannot be mapped for the padding block');
    const id = this.take(1)[0]!;
    if (id !== 0) throw new Error(`kvpool: the padding block came out as ${id}, not 0`);
    this.paddingReserved = true;
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
    if (!this.canTake(n)) {
      this.allocationFailures++;
      return false;
    }
    const ids = this.take(n);
    for (let i = 0; i < n; i++) {
      this.ref[ids[i]!] = 1;
      dst[at + i] = ids[i]!;
    }
    this.blocksAllocated += n;
    this.peakUsed = Math.max(this.peakUsed, this.numUsedBlocks());
    return true;
  }

  deallocate(ids: ArrayLike<number>): void {
    this.live();
    const list = checkInt32Array('ids', ids);
    this.checkRelease(list, 0, list.length, 'ids');
    for (let i = 0; i < list.length; i++) this.drop(list[i]!);
  }

  /** @internal Drops a reference on each of ids[start..end); 0, or -1 (nothing changed) when one has no holder. */
  releaseFrom(ids: Int32Array, start: number, end: number): number {
    this.live();
    try {
      this.checkRelease(ids, start, end, 'ids');
    } catch {
      return -1;
    }
    for (let i = start; i < end; i++) this.drop(ids[i]!);
    return 0;
  }

  retain(ids: ArrayLike<number>): void {
    this.live();
    const list = checkInt32Array('ids', ids);
    for (let i = 0; i < list.length; i++) this.checkHeldId(list[i]!, `ids[${i}]`);
    for (let i = 0; i < list.length; i++) this.ref[list[i]!]!++;
  }

  /** @internal */
  retainFrom(ids: Int32Array, start: number, end: number): number {
    this.live();
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      if (!(id > 0 && id < this.numBlocks && this.ref[id]! > 0)) return -1;
    }
    for (let i = start; i < end; i++) this.ref[ids[i]!]!++;
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
    this.reserved.push(...this.take(k));
    return true;
  }

  /** Gives the reserved blocks back to their pages. */
  freeReserved(): void {
    this.live();
    for (const id of this.reserved.splice(0)) this.freeId(id);
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

  /** Map/unmap events since the last call, oldest first. */
  takeEvents(): PageEvent[] {
    this.live();
    return this.allocator.takeEvents();
  }

  /** Pages by state: free (unmapped), reserved (mapped, idle), allocated (holding blocks). */
  pageStates(): { free: number[]; reserved: number[]; allocated: number[] } {
    this.live();
    const a = this.allocator;
    return { free: [...a.free], reserved: [...a.reserved], allocated: [...a.allocated].sort((x, y) => x - y) };
  }

  // ---- figures (part E, with exact per-page block counts) ----

  /** Free blocks on pages in use, reserved blocks, and every block on reserved mapped pages. */
  numFreeBlocks(): number {
    this.live();
    let n = this.numAvail + this.reserved.length;
    for (const p of this.allocator.reserved) n += this.layout.get(p)!.count;
    return n;
  }

  /** Blocks handed out from pages (the padding block included), reserved blocks excluded. */
  numUsedBlocks(): number {
    this.live();
    let n = -this.numAvail - this.reserved.length;
    for (const p of this.avail.values()) n += p.count;
    for (const p of this.full.values()) n += p.count;
    return n;
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
    return this.numUsedBlocks() / this.numTotalBlocks();
  }

  stats(): BlockManagerStats {
    this.live();
    return {
      numFreeBlocks: this.numFreeBlocks(),
      numUsedBlocks: this.numUsedBlocks(),
      numBlocksInPrefixCache: 0,
      numTotalBlocks: this.numBlocks,
      numEvictableBlocks: 0,
      matchCalls: 0,
      blocksQueried: 0,
      blocksHit: 0,
      blocksInserted: 0,
      blocksEvicted: 0,
      blocksAllocated: this.blocksAllocated,
      allocationFailures: this.allocationFailures,
      peakUsedBlocks: this.peakUsed,
    };
  }

  /** XTensor blocks are never cached, so they carry no hash. */
  blockHash(id: number): Uint8Array | null {
    this.live();
    checkInt('id', id, 0, this.numBlocks - 1);
    return null;
  }

  /** Nothing is ever stored in or removed from a prefix cache here: no events. */
  recordEvents(on: boolean): void {
    this.live();
    if (typeof on !== 'boolean') throw new TypeError(`on must be a boolean, got ${describe(on)}`);
  }

  drainEvents(_dpRank = 0, out: KVEvent[] = []): KVEvent[] {
    this.live();
    return out;
  }

  resetPrefixCache(): number {
    this.live();
    return 0;
  }

  /** References held on `id` by callers. */
  refCount(id: number): number {
    this.live();
    checkInt('id', id, 0, this.numBlocks - 1);
    return this.ref[id]!;
  }

  /** Holders of every id (index = id); for audits. */
  holderCounts(): Int32Array {
    this.live();
    return this.ref.slice();
  }

  /** Every id's BlockState code (no prefix cache here: free, held, shared, padding). */
  blockStates(out?: Uint8Array): Uint8Array {
    this.live();
    const n = this.numBlocks;
    if (out !== undefined && (!(out instanceof Uint8Array) || out.length < n)) {
      throw new TypeError(`out must be a Uint8Array of length >= ${n}, got ${out instanceof Uint8Array ? `one of length ${out.length}` : describe(out)}`);
    }
    const dst = out ?? new Uint8Array(n);
    for (let id = 0; id < n; id++) {
      const h = this.ref[id]!;
      dst[id] = id === 0 ? BlockState.Padding : h > 1 ? BlockState.Shared : h === 1 ? BlockState.Held : BlockState.Free;
    }
    return dst;
  }

  /** Free ids of the pages in use, by page ascending, each page's next id first. */
  freeIds(): Int32Array {
    this.live();
    const pages = [...this.avail.keys()].sort((a, b) => a - b);
    return Int32Array.from(pages.flatMap((p) => this.avail.get(p)!.free));
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

  check(): void {
    this.live();
    const a = this.allocator;
    const fail = (msg: string): never => {
      throw new Error(`kvpool: XTensor state is inconsistent: ${msg}`);
    };
    const state = new Map<number, string>();
    for (const [list, what] of [[a.free, 'free'], [a.reserved, 'reserved'], [[...a.allocated], 'allocated']] as const) {
      for (const p of list) {
        if (!this.layout.has(p)) fail(`page ${p} holds no block but is ${what}`);
        if (state.has(p)) fail(`page ${p} is both ${state.get(p)} and ${what}`);
        state.set(p, what);
      }
    }
    if (state.size !== this.layout.size) fail('a usable page is in no allocator list');
    if (a.reserved.length > Math.max(a.cfg.maxReserved, a.cfg.minReserved)) fail('more reserved pages than the maximum');
    const mapped = a.sleeping ? 0 : a.reserved.length + a.allocated.size;
    if (a.physFree !== a.cfg.numPhysicalPages - mapped * a.cfg.physPerPage) fail(`physical pages free ${a.physFree}, expected ${a.cfg.numPhysicalPages - mapped * a.cfg.physPerPage}`);
    const inUse = new Set([...this.avail.keys(), ...this.full.keys()]);
    if (inUse.size !== this.avail.size + this.full.size) fail('a page is both avail and full');
    if (inUse.size !== a.allocated.size || [...inUse].some((p) => !a.allocated.has(p))) fail('pages in use differ from the allocated pages');
    const isFree = new Uint8Array(this.numBlocks);
    let avail = 0;
    for (const [p, pg] of [...this.avail, ...this.full]) {
      const l = this.layout.get(p)!;
      if (pg.first !== l.first || pg.count !== l.count) fail(`page ${p} has the wrong block range`);
      const isFull = this.full.has(p);
      if (isFull ? pg.free.length !== 0 : pg.free.length === 0 || pg.free.length >= pg.count) fail(`page ${p} is in the wrong list`);
      for (const id of pg.free) {
        if (this.pageOfId[id] !== p || isFree[id]) fail(`page ${p} lists free id ${id} wrongly`);
        isFree[id] = 1;
      }
      if (!isFull) avail += pg.free.length;
    }
    if (avail !== this.numAvail) fail('the available-block count is wrong');
    const isReserved = new Uint8Array(this.numBlocks);
    for (const id of this.reserved) {
      if (isReserved[id]) fail(`block ${id} is reserved twice`);
      isReserved[id] = 1;
    }
    for (let id = 0; id < this.numBlocks; id++) {
      const p = this.pageOfId[id]!;
      const onPage = p >= 0 && inUse.has(p);
      const taken = onPage && !isFree[id];
      const padding = id === 0 && this.paddingReserved;
      const holders = this.ref[id]! + isReserved[id]! + (padding ? 1 : 0);
      if (this.ref[id]! < 0 || holders > 0 !== taken || (taken && this.ref[id]! > 0 && isReserved[id]!) || (padding && this.ref[id]! > 0)) {
        fail(`block ${id} is ${taken ? 'handed out' : 'not handed out'} but has ${this.ref[id]} holders${isReserved[id] ? ' and is reserved' : ''}`);
      }
    }
  }

  // ---- internals ----

  private ready(): void {
    if (!this.paddingReserved) throw new Error('kvpool: reservePaddingBlocks() must be called before the first allocation');
    if (this.allocator.sleeping) throw new Error('kvpool: the manager is asleep; wakeup() first');
  }

  /** True when `n` blocks can be had: reserved blocks, free blocks on pages in use, then new pages. */
  private canTake(n: number): boolean {
    let have = this.reserved.length + this.numAvail;
    if (have >= n) return true;
    for (const p of this.allocator.upcoming()) {
      have += this.layout.get(p)!.count;
      if (have >= n) return true;
    }
    return false;
  }

  /** Hands out `n` ids (canTake(n) holds): reserved first, then the lowest page with free blocks. */
  private take(n: number): number[] {
    const out = this.reserved.splice(0, Math.min(n, this.reserved.length));
    while (out.length < n) {
      let page: Page | undefined;
      let pid = -1;
      for (const [p, pg] of this.avail) {
        if (pid < 0 || p < pid) {
          pid = p;
          page = pg;
        }
      }
      if (page === undefined) {
        pid = this.allocator.allocPage();
        const l = this.layout.get(pid)!;
        page = { first: l.first, count: l.count, free: [] };
        for (let id = l.first; id < l.first + l.count; id++) page.free.push(id);
        this.avail.set(pid, page);
        this.numAvail += l.count;
      }
      const k = Math.min(n - out.length, page.free.length);
      out.push(...page.free.splice(0, k));
      this.numAvail -= k;
      if (page.free.length === 0) {
        this.avail.delete(pid);
        this.full.set(pid, page);
      }
    }
    return out;
  }

  /** The last holder let go: the id goes back to its page; an emptied page goes back to the allocator. */
  private freeId(id: number): void {
    const p = this.pageOfId[id]!;
    const wasFull = this.full.get(p);
    const page = wasFull ?? this.avail.get(p)!;
    page.free.push(id);
    if (page.free.length === page.count) {
      this.avail.delete(p);
      this.full.delete(p);
      this.numAvail -= page.count - 1;
      this.allocator.freePages([p]);
      return;
    }
    this.numAvail++;
    if (wasFull) {
      this.full.delete(p);
      this.avail.set(p, page);
    }
  }

  private drop(id: number): void {
    if (--this.ref[id]! === 0) this.freeId(id);
  }

  private checkHeldId(id: number, at: string): void {
    if (id === 0) throw new RangeError(`${at} = 0 is the padding block, which is never handed out`);
    if (!(id > 0 && id < this.numBlocks)) throw new RangeError(`${at} = ${id} is out of range: this manager's ids are 1..${this.numBlocks - 1}`);
    if (this.ref[id] === 0) throw new RangeError(`${at} = ${id} has no holder left (it is free)`);
  }

  /** Every listed release must have a holder left, duplicates counted. */
  private checkRelease(ids: ArrayLike<number>, start: number, end: number, name: string): void {
    const left = new Map<number, number>();
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      this.checkHeldId(id, `${name}[${i}]`);
      const h = left.get(id) ?? this.ref[id]!;
      if (h <= 0) throw new RangeError(`${name}[${i}] = ${id} has no holder left (it is released more times than held)`);
      left.set(id, h - 1);
    }
  }
}
