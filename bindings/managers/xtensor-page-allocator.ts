// The page allocator of one dp rank: virtual pages of the KV tensors are free
// (unmapped), reserved (mapped but idle) or allocated (mapped, owned by the
// block manager). Mapping a page backs it with 2L physical pages (a K and a V
// page of every layer). Every map and unmap is recorded as an event a runtime
// can act on (e.g. with WebGPU buffers). See docs/xtensor.md.
//
// Its state is part of the manager's XTensorState (xtensor-state.ts); this
// class holds nothing mutable of its own, so every thread's handle over a
// shared state is the same allocator.
//
// The reference's prefetch runs on a background thread; here it runs at once
// where the reference triggers it, so the outcome is deterministic.

import {
  F_EVENTS_LOST, F_PHYS_FREE, W_ALLOCATED_PAGES, W_EV_HEAD, W_EV_LEN, W_FREE_PAGES_HEAD, W_FREE_PAGES_LEN, W_RES_PAGES_HEAD,
  W_RES_PAGES_LEN, W_RES_PAGE_BLOCKS, W_SLEEPING, type XTensorState,
} from './xtensor-state.js';

/** A change of a virtual page's backing: map it on all 2L per-layer K/V tensors, or unmap it. */
export interface PageEvent {
  readonly type: 'map' | 'unmap';
  readonly rank: number;
  readonly page: number;
  /** Byte offset of the page in every per-layer K/V tensor: page * pageSize. */
  readonly offset: number;
}

export class PageAllocator {
  private readonly perPage: number;

  constructor(private readonly st: XTensorState) {
    this.perPage = st.shape.physPerPage;
  }

  get sleeping(): boolean {
    return this.st.i32[W_SLEEPING] !== 0;
  }

  get physFree(): number {
    return this.st.f64[F_PHYS_FREE]!;
  }

  get numReserved(): number {
    return this.st.i32[W_RES_PAGES_LEN]!;
  }

  get numAllocated(): number {
    return this.st.i32[W_ALLOCATED_PAGES]!;
  }

  /** Unmapped pages; the front is mapped next. */
  freeList(): number[] {
    return this.st.list(this.st.freePages, W_FREE_PAGES_HEAD, W_FREE_PAGES_LEN);
  }

  /** Mapped idle pages; the front is handed out next. */
  reservedList(): number[] {
    return this.st.list(this.st.resPages, W_RES_PAGES_HEAD, W_RES_PAGES_LEN);
  }

  /** Allocated pages, ascending. */
  allocatedList(): number[] {
    const out: number[] = [];
    const a = this.st.pageAlloc;
    for (let p = 0; p < a.length; p++) if (a[p] !== 0) out.push(p);
    return out;
  }

  /**
   * True when `allocPage` can hand out pages holding `need` more blocks:
   * the reserved pages first, then as many free pages as physical pages back.
   */
  canSupply(need: number): boolean {
    const st = this.st;
    const count = st.pageCount;
    const nRes = st.i32[W_RES_PAGES_LEN]!;
    for (let k = 0; k < nRes; k++) {
      need -= count[st.peek(st.resPages, W_RES_PAGES_HEAD, k)]!;
      if (need <= 0) return true;
    }
    const mappable = Math.min(st.i32[W_FREE_PAGES_LEN]!, Math.floor(st.f64[F_PHYS_FREE]! / this.perPage));
    for (let k = 0; k < mappable; k++) {
      need -= count[st.peek(st.freePages, W_FREE_PAGES_HEAD, k)]!;
      if (need <= 0) return true;
    }
    return false;
  }

  /** A mapped page for the block manager, or -1 when virtual or physical pages ran out. */
  allocPage(): number {
    const st = this.st;
    const i = st.i32;
    let page: number;
    if (i[W_RES_PAGES_LEN]! > 0) {
      page = this.shiftReserved();
    } else if (i[W_FREE_PAGES_LEN]! > 0 && st.f64[F_PHYS_FREE]! >= this.perPage) {
      page = st.shift(st.freePages, W_FREE_PAGES_HEAD, W_FREE_PAGES_LEN);
      this.map(page);
    } else return -1;
    st.pageAlloc[page] = 1;
    i[W_ALLOCATED_PAGES]!++;
    this.prefetch();
    return page;
  }

  /** Takes a page back from the block manager: up to the maximum stay mapped, the rest are unmapped. */
  freePage(p: number): void {
    const st = this.st;
    st.pageAlloc[p] = 0;
    st.i32[W_ALLOCATED_PAGES]!--;
    if (this.sleeping) {
      this.pushFree(p); // already unmapped by sleep()
    } else if (st.i32[W_RES_PAGES_LEN]! < st.shape.maxReserved) {
      this.pushReserved(p);
    } else {
      this.unmap(p);
      this.pushFree(p);
    }
  }

  /** Maps free pages into the reserve until it holds the minimum (or pages run out). */
  prefetch(): void {
    if (this.sleeping) return;
    const st = this.st;
    const i = st.i32;
    while (i[W_RES_PAGES_LEN]! < st.shape.minReserved && i[W_FREE_PAGES_LEN]! > 0 && st.f64[F_PHYS_FREE]! >= this.perPage) {
      const p = st.shift(st.freePages, W_FREE_PAGES_HEAD, W_FREE_PAGES_LEN);
      this.map(p);
      this.pushReserved(p);
    }
  }

  /** Unmaps every reserved page. */
  trim(): void {
    if (this.sleeping) return;
    while (this.st.i32[W_RES_PAGES_LEN]! > 0) {
      const p = this.shiftReserved();
      this.unmap(p);
      this.pushFree(p);
    }
  }

  /** Unmaps reserved and allocated pages, keeping the lists (physical memory is released). */
  sleep(): void {
    if (this.sleeping) return;
    for (const p of this.mappedPages()) this.unmap(p);
    this.st.i32[W_SLEEPING] = 1;
  }

  /** Maps again what sleep() unmapped. */
  wakeup(): void {
    if (!this.sleeping) return;
    this.st.i32[W_SLEEPING] = 0;
    for (const p of this.mappedPages()) this.map(p);
  }

  /** Pages that are mapped while awake: reserved in order, then allocated ascending. */
  mappedPages(): number[] {
    return [...this.reservedList(), ...this.allocatedList()];
  }

  /** The events recorded since the last call, oldest first (the ring keeps the newest eventCapacity). */
  takeEvents(): PageEvent[] {
    const st = this.st;
    const n = st.i32[W_EV_LEN]!;
    const { dpRank, pageSize } = st.shape;
    const out = new Array<PageEvent>(n);
    for (let k = 0; k < n; k++) {
      const e = st.shift(st.events, W_EV_HEAD, W_EV_LEN);
      const page = e > 0 ? e - 1 : -e - 1;
      out[k] = { type: e > 0 ? 'map' : 'unmap', rank: dpRank, page, offset: page * pageSize };
    }
    return out;
  }

  /** Events dropped (oldest first) because the ring was full when a new one came. */
  get eventsLost(): number {
    return this.st.f64[F_EVENTS_LOST]!;
  }

  private shiftReserved(): number {
    const st = this.st;
    const p = st.shift(st.resPages, W_RES_PAGES_HEAD, W_RES_PAGES_LEN);
    st.i32[W_RES_PAGE_BLOCKS]! -= st.pageCount[p]!;
    return p;
  }

  private pushReserved(p: number): void {
    const st = this.st;
    st.push(st.resPages, W_RES_PAGES_HEAD, W_RES_PAGES_LEN, p);
    st.i32[W_RES_PAGE_BLOCKS]! += st.pageCount[p]!;
  }

  private pushFree(p: number): void {
    this.st.push(this.st.freePages, W_FREE_PAGES_HEAD, W_FREE_PAGES_LEN, p);
  }

  private map(page: number): void {
    this.st.f64[F_PHYS_FREE]! -= this.perPage;
    this.record(page + 1);
  }

  private unmap(page: number): void {
    this.st.f64[F_PHYS_FREE]! += this.perPage;
    this.record(-page - 1);
  }

  private record(e: number): void {
    const st = this.st;
    if (st.i32[W_EV_LEN] === st.events.length) {
      st.shift(st.events, W_EV_HEAD, W_EV_LEN);
      st.f64[F_EVENTS_LOST]!++;
    }
    st.push(st.events, W_EV_HEAD, W_EV_LEN, e);
  }
}
