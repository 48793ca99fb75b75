// Model of XTensorBlockManagerImpl and its page allocator (docs/xtensor.md),
// written for clarity: per-id byte ranges decide which ids are usable, the
// figures are counted by scanning every id, and an allocation that cannot be
// completed is undone from a snapshot. Mirrors
// bindings/managers/xtensor-block-manager-impl.ts and xtensor-page-allocator.ts.

import { modelInt, modelInt32s } from './validate.js';

export interface ModelXTensorOptions {
  numBlocks: number;
  pageSize: number;
  blockBytes: number;
  numLayers: number;
  numPhysicalPages?: number;
  minReservedPages?: number;
  maxReservedPages?: number;
}

export interface ModelPageEvent {
  type: 'map' | 'unmap';
  rank: number;
  page: number;
  offset: number;
}

interface State {
  freeQ: number[];
  reservedQ: number[];
  allocated: number[];
  physFree: number;
  sleeping: boolean;
  /** Free ids per in-use page, next first. */
  pageFree: Record<number, number[]>;
  reservedBlocks: number[];
  ref: number[];
  padding: boolean;
  events: ModelPageEvent[];
}

export class ModelXTensor {
  readonly numBlocks: number;
  readonly P: number;
  readonly Bm: number;
  readonly perPage: number;
  readonly numPhys: number;
  readonly min: number;
  readonly max: number;
  /** page -> its usable ids, for usable pages. */
  readonly pageIds = new Map<number, number[]>();
  s: State;
  /** The counters the library's stats() reports (no prefix cache: the rest are 0). */
  readonly counters = { blocksAllocated: 0, allocationFailures: 0 };
  /** The most ids used at once, measured after each allocation. */
  peakUsed = 0;

  constructor(o: ModelXTensorOptions) {
    this.numBlocks = o.numBlocks;
    this.P = o.pageSize;
    this.Bm = o.blockBytes;
    this.perPage = 2 * o.numLayers;
    const cover = Math.ceil((o.numBlocks * o.blockBytes) / o.pageSize);
    this.numPhys = o.numPhysicalPages ?? cover * this.perPage;
    this.min = o.minReservedPages ?? 8;
    this.max = o.maxReservedPages ?? 32;
    const virtualPages = Math.min(cover, Math.floor(this.numPhys / this.perPage));
    for (let id = 0; id < o.numBlocks; id++) {
      const startPage = Math.floor((id * this.Bm) / this.P);
      const endPage = Math.floor(((id + 1) * this.Bm - 1) / this.P);
      if (startPage !== endPage || startPage >= virtualPages) continue; // straddles, or beyond the pages
      if (!this.pageIds.has(startPage)) this.pageIds.set(startPage, []);
      this.pageIds.get(startPage)!.push(id);
    }
    this.s = {
      freeQ: [...this.pageIds.keys()].sort((a, b) => a - b),
      reservedQ: [],
      allocated: [],
      physFree: this.numPhys,
      sleeping: false,
      pageFree: {},
      reservedBlocks: [],
      ref: new Array(o.numBlocks).fill(0),
      padding: false,
      events: [],
    };
  }

  private event(type: 'map' | 'unmap', page: number): void {
    this.s.events.push({ type, rank: 0, page, offset: page * this.P });
    this.s.physFree += type === 'map' ? -this.perPage : this.perPage;
  }

  private prefetch(): void {
    const s = this.s;
    while (!s.sleeping && s.reservedQ.length < this.min && s.freeQ.length > 0 && s.physFree >= this.perPage) {
      const p = s.freeQ.shift()!;
      this.event('map', p);
      s.reservedQ.push(p);
    }
  }

  private allocPage(): number | null {
    const s = this.s;
    let p: number;
    if (s.reservedQ.length > 0) p = s.reservedQ.shift()!;
    else if (s.freeQ.length > 0 && s.physFree >= this.perPage) {
      p = s.freeQ.shift()!;
      this.event('map', p);
    } else return null;
    s.allocated.push(p);
    s.pageFree[p] = [...this.pageIds.get(p)!];
    this.prefetch();
    return p;
  }

  private freePage(p: number): void {
    const s = this.s;
    s.allocated = s.allocated.filter((x) => x !== p);
    delete s.pageFree[p];
    if (s.sleeping) s.freeQ.push(p);
    else if (s.reservedQ.length < this.max) s.reservedQ.push(p);
    else {
      this.event('unmap', p);
      s.freeQ.push(p);
    }
  }

  /** One id, or null: reserved blocks first, then the lowest page in use with a free id, then a new page. */
  private takeOne(): number | null {
    const s = this.s;
    if (s.reservedBlocks.length > 0) return s.reservedBlocks.shift()!;
    const withFree = s.allocated.filter((p) => s.pageFree[p]!.length > 0).sort((a, b) => a - b);
    let p: number | null = withFree[0] ?? null;
    if (p === null) p = this.allocPage();
    if (p === null) return null;
    return s.pageFree[p]!.shift()!;
  }

  /** n ids or null with the state as before. */
  private takeAll(n: number): number[] | null {
    const snapshot = structuredClone(this.s);
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const id = this.takeOne();
      if (id === null) {
        this.s = snapshot;
        return null;
      }
      out.push(id);
    }
    return out;
  }

  reservePaddingBlocks(): void {
    const got = this.takeAll(1);
    if (!got || got[0] !== 0) throw new Error('padding');
    this.s.padding = true;
  }

  private ready(): void {
    if (!this.s.padding || this.s.sleeping) throw new Error('not ready');
  }

  allocate(n: number): number[] | null {
    modelInt('n', n);
    this.ready();
    const got = this.takeAll(n);
    if (!got) {
      this.counters.allocationFailures++;
      return null;
    }
    for (const id of got) this.s.ref[id] = 1;
    this.counters.blocksAllocated += n;
    this.peakUsed = Math.max(this.peakUsed, this.numUsedBlocks());
    return got;
  }

  private freeId(id: number): void {
    const s = this.s;
    const p = Math.floor((id * this.Bm) / this.P);
    s.pageFree[p]!.push(id);
    if (s.pageFree[p]!.length === this.pageIds.get(p)!.length) this.freePage(p);
  }

  deallocate(ids: number[]): void {
    modelInt32s('ids', ids);
    const left = [...this.s.ref];
    for (const id of ids) {
      if (id <= 0 || id >= this.numBlocks || left[id]! <= 0) throw new RangeError('not held');
      left[id]!--;
    }
    for (const id of ids) if (--this.s.ref[id]! === 0) this.freeId(id);
  }

  retain(ids: number[]): void {
    modelInt32s('ids', ids);
    for (const id of ids) if (id <= 0 || id >= this.numBlocks || this.s.ref[id]! <= 0) throw new RangeError('not held');
    for (const id of ids) this.s.ref[id]!++;
  }

  tryToReserve(k: number): boolean {
    modelInt('k', k);
    this.ready();
    const got = this.takeAll(k);
    if (!got) return false;
    this.s.reservedBlocks.push(...got);
    return true;
  }

  freeReserved(): void {
    for (const id of this.s.reservedBlocks.splice(0)) this.freeId(id);
  }

  trim(): void {
    if (this.s.sleeping) return;
    for (const p of this.s.reservedQ.splice(0)) {
      this.event('unmap', p);
      this.s.freeQ.push(p);
    }
  }

  private mapped(): number[] {
    return [...this.s.reservedQ, ...[...this.s.allocated].sort((a, b) => a - b)];
  }

  sleep(): void {
    if (this.s.sleeping) return;
    for (const p of this.mapped()) this.event('unmap', p);
    this.s.sleeping = true;
  }

  wakeup(): void {
    if (!this.s.sleeping) return;
    this.s.sleeping = false;
    for (const p of this.mapped()) this.event('map', p);
  }

  takeEvents(): ModelPageEvent[] {
    const e = this.s.events;
    this.s.events = [];
    return e;
  }

  /** Scans every id: free ones on pages in use, reserved blocks, every id on reserved pages. */
  numFreeBlocks(): number {
    let n = this.s.reservedBlocks.length;
    for (const p of this.s.allocated) n += this.s.pageFree[p]!.length;
    for (const p of this.s.reservedQ) n += this.pageIds.get(p)!.length;
    return n;
  }

  /** Ids handed out that a caller or the padding holds. */
  numUsedBlocks(): number {
    let n = 0;
    for (let id = 0; id < this.numBlocks; id++) if (this.s.ref[id]! > 0 || (id === 0 && this.s.padding)) n++;
    return n;
  }

  /** Used / all blocks (the reference counts the padding block on both sides). */
  kvCacheUtilization(): number {
    return this.numUsedBlocks() / this.numBlocks;
  }

  /** Free ids of the pages in use, by page ascending, each page's next id first. */
  freeIds(): number[] {
    return [...this.s.allocated].sort((a, b) => a - b).flatMap((p) => this.s.pageFree[p]!);
  }

  /** The figures of the library's stats(): no prefix cache, so no lookups, entries or evictions. */
  stats() {
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
      ...this.counters,
      peakUsedBlocks: this.peakUsed,
    };
  }

  pageStates() {
    return { free: [...this.s.freeQ], reserved: [...this.s.reservedQ], allocated: [...this.s.allocated].sort((a, b) => a - b) };
  }
}
