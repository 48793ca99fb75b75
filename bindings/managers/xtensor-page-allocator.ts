// The page allocator of one dp rank (docs/xtensor.md, which block, which page): virtual pages of the
// KV tensors are free (unmapped), reserved (mapped but idle) or allocated
// (mapped, owned by the block manager). Mapping a page backs it with 2L
// physical pages (a K and a V page of every layer). Every map and unmap is
// recorded as an event a runtime can act on (e.g. with WebGPU buffers).
//
// The reference's prefetch runs on a background thread; here it runs at once
// where the reference triggers it, so the outcome is deterministic.

/** A change of a virtual page's backing: map it on all 2L per-layer K/V tensors, or unmap it. */
export interface PageEvent {
  readonly type: 'map' | 'unmap';
  readonly rank: number;
  readonly page: number;
  /** Byte offset of the page in every per-layer K/V tensor: page * pageSize. */
  readonly offset: number;
}

export interface PageAllocatorConfig {
  rank: number;
  pageSize: number;
  /** Physical pages one virtual page consumes (2 * numLayers). */
  physPerPage: number;
  numPhysicalPages: number;
  minReserved: number;
  maxReserved: number;
  /** The virtual pages that hold at least one whole block, ascending. */
  pages: readonly number[];
}

export class PageAllocator {
  /** Unmapped pages; the front is mapped next. */
  readonly free: number[];
  /** Mapped idle pages; the front is handed out next. */
  readonly reserved: number[] = [];
  readonly allocated = new Set<number>();
  physFree: number;
  sleeping = false;
  private events: PageEvent[] = [];

  constructor(readonly cfg: PageAllocatorConfig) {
    this.free = [...cfg.pages];
    this.physFree = cfg.numPhysicalPages;
  }

  /** Pages `allocPage` can still hand out, in the order it would. */
  *upcoming(): Generator<number> {
    yield* this.reserved;
    let mappable = Math.floor(this.physFree / this.cfg.physPerPage);
    for (const p of this.free) {
      if (mappable-- <= 0) return;
      yield p;
    }
  }

  /** A mapped page for the block manager, or -1 when virtual or physical pages ran out. */
  allocPage(): number {
    let page: number;
    if (this.reserved.length > 0) {
      page = this.reserved.shift()!;
    } else if (this.free.length > 0 && this.physFree >= this.cfg.physPerPage) {
      page = this.free.shift()!;
      this.map(page);
    } else return -1;
    this.allocated.add(page);
    this.prefetch();
    return page;
  }

  /** Takes pages back from the block manager: up to the maximum stay mapped, the rest are unmapped. */
  freePages(pages: readonly number[]): void {
    for (const p of pages) {
      this.allocated.delete(p);
      if (this.sleeping) {
        this.free.push(p); // already unmapped by sleep()
      } else if (this.reserved.length < this.cfg.maxReserved) {
        this.reserved.push(p);
      } else {
        this.unmap(p);
        this.free.push(p);
      }
    }
  }

  /** Maps free pages into the reserve until it holds the minimum (or pages run out). */
  prefetch(): void {
    if (this.sleeping) return;
    while (this.reserved.length < this.cfg.minReserved && this.free.length > 0 && this.physFree >= this.cfg.physPerPage) {
      const p = this.free.shift()!;
      this.map(p);
      this.reserved.push(p);
    }
  }

  /** Unmaps every reserved page. */
  trim(): void {
    if (this.sleeping) return;
    for (const p of this.reserved.splice(0)) {
      this.unmap(p);
      this.free.push(p);
    }
  }

  /** Unmaps reserved and allocated pages, keeping the lists (physical memory is released). */
  sleep(): void {
    if (this.sleeping) return;
    for (const p of this.mappedPages()) this.unmap(p);
    this.sleeping = true;
  }

  /** Maps again what sleep() unmapped. */
  wakeup(): void {
    if (!this.sleeping) return;
    this.sleeping = false;
    for (const p of this.mappedPages()) this.map(p);
  }

  /** Pages that are mapped while awake: reserved in order, then allocated ascending. */
  mappedPages(): number[] {
    return [...this.reserved, ...[...this.allocated].sort((a, b) => a - b)];
  }

  takeEvents(): PageEvent[] {
    const e = this.events;
    this.events = [];
    return e;
  }

  private map(page: number): void {
    this.physFree -= this.cfg.physPerPage;
    this.events.push({ type: 'map', rank: this.cfg.rank, page, offset: page * this.cfg.pageSize });
  }

  private unmap(page: number): void {
    this.physFree += this.cfg.physPerPage;
    this.events.push({ type: 'unmap', rank: this.cfg.rank, page, offset: page * this.cfg.pageSize });
  }
}
