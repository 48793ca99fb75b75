// Model of LinearStatePrefixCache (docs/linear-state.md): arrays and a Map whose
// insertion order is the LRU (first = least recent). Eviction walks the LRU
// and takes the first unpinned checkpoint, as the reference does.

export type SlotState = 'free' | 'live' | 'pending' | 'committed';

/** A sequence as the batch flow sees it. */
export interface ModelLinearSeq {
  slot: number;
  kvCached: number;
  promptTokens: number;
  initialized: boolean;
}

export interface ModelOp {
  liveSlot: number;
  restore?: string | null;
  save?: string | null;
}

export interface ModelBatch {
  restoreSrc: number[];
  saveDst: number[];
  pins: number[]; // restore pins then save pins (slots)
  reservations: number[];
  promotions: { hash: string; seq: ModelLinearSeq; live: number; replacement: number }[];
}

export class ModelLinearStateCache {
  /** Free stack, bottom first: the last element is handed out next. */
  readonly free: number[] = [];
  readonly state: SlotState[];
  readonly pins: number[];
  readonly hashOf: (string | null)[];
  /** hash -> committed slot, least recent first. */
  readonly lru = new Map<string, number>();
  readonly counters = { matchCalls: 0, matchHits: 0, checkpointsCommitted: 0, checkpointsEvicted: 0 };

  constructor(readonly numSlots: number) {
    for (let s = numSlots - 1; s >= 1; s--) this.free.push(s);
    this.state = new Array<SlotState>(numSlots).fill('free');
    this.state[0] = 'live';
    this.pins = new Array<number>(numSlots).fill(0);
    this.hashOf = new Array<string | null>(numSlots).fill(null);
  }

  private touch(h: string): void {
    const s = this.lru.get(h)!;
    this.lru.delete(h);
    this.lru.set(h, s);
  }

  private freeSlot(s: number): void {
    this.state[s] = 'free';
    this.hashOf[s] = null;
    this.free.push(s);
  }

  /** ensure_free_slot: at most one eviction. */
  private ensureFree(): boolean {
    if (this.free.length > 0) return true;
    for (const [h, s] of this.lru) {
      if (this.pins[s] === 0) {
        this.lru.delete(h);
        this.freeSlot(s);
        this.counters.checkpointsEvicted++;
        return true;
      }
    }
    return false;
  }

  private take(st: SlotState): number {
    if (!this.ensureFree()) return 0;
    const s = this.free.pop()!;
    this.state[s] = st;
    return s;
  }

  acquireLive(): number | null {
    const s = this.take('live');
    return s === 0 ? null : s;
  }

  releaseLive(s: number): void {
    if (this.state[s] !== 'live') throw new Error(`model: slot ${s} is not live`);
    this.freeSlot(s);
  }

  match(h: string): number {
    this.counters.matchCalls++;
    const s = this.lru.get(h);
    if (s === undefined) return 0;
    this.pins[s]!++;
    this.touch(h);
    this.counters.matchHits++;
    return s;
  }

  unpin(s: number): void {
    if (this.pins[s]! <= 0) throw new Error(`model: slot ${s} is not pinned`);
    this.pins[s]!--;
  }

  contains(h: string): boolean {
    return this.lru.has(h);
  }

  /** A committed slot (pending false), a new pending slot, or slot -1. */
  reserve(h: string, pin: boolean): { slot: number; pending: boolean } {
    const c = this.lru.get(h);
    if (c !== undefined) {
      if (pin) this.pins[c]!++;
      this.touch(h);
      return { slot: c, pending: false };
    }
    const s = this.take('pending');
    if (s === 0) return { slot: -1, pending: false };
    this.hashOf[s] = h;
    return { slot: s, pending: true };
  }

  /** insert_checkpoint of a held slot under its hash; the existing entry wins. */
  private graft(s: number): number {
    const h = this.hashOf[s]!;
    const c = this.lru.get(h);
    if (c !== undefined) {
      this.touch(h);
      this.freeSlot(s);
      return c;
    }
    this.state[s] = 'committed';
    this.lru.set(h, s);
    this.counters.checkpointsCommitted++;
    return s;
  }

  commit(s: number): number {
    if (this.state[s] !== 'pending') throw new Error(`model: slot ${s} is not pending`);
    return this.graft(s);
  }

  abort(s: number): void {
    if (this.state[s] !== 'pending') throw new Error(`model: slot ${s} is not pending`);
    this.freeSlot(s);
  }

  resolve(ops: ModelOp[], seqs?: (ModelLinearSeq | null)[]): ModelBatch {
    const b: ModelBatch = { restoreSrc: [], saveDst: [], pins: [], reservations: [], promotions: [] };
    ops.forEach((op) => {
      let src = -1;
      if (op.restore) {
        const s = this.match(op.restore);
        if (s > 0) {
          src = s;
          b.pins.push(s);
        }
      }
      b.restoreSrc.push(src);
    });
    const handled = new Map<string, number>();
    ops.forEach((op, i) => {
      const h = op.save;
      if (!h) return b.saveDst.push(-1);
      if (handled.has(h)) return b.saveDst.push(handled.get(h)!);
      let slot = -1;
      const seq = seqs?.[i];
      if (this.contains(h)) {
        slot = this.reserve(h, true).slot;
        b.pins.push(slot);
      } else if (seq && op.liveSlot > 0 && seq.slot === op.liveSlot && seq.kvCached > 0 && seq.kvCached < seq.promptTokens) {
        const rep = this.acquireLive();
        if (rep !== null) {
          b.promotions.push({ hash: h, seq, live: op.liveSlot, replacement: rep });
          slot = op.liveSlot;
        }
      }
      if (slot < 0) {
        const r = this.reserve(h, false);
        if (r.pending) b.reservations.push(r.slot);
        slot = r.slot;
      }
      handled.set(h, slot);
      b.saveDst.push(slot);
    });
    return b;
  }

  commitBatch(b: ModelBatch): number {
    for (const s of b.reservations) this.commit(s);
    let applied = 0;
    for (const p of b.promotions) {
      if (p.seq.slot === p.live && this.state[p.live] === 'live') {
        this.hashOf[p.live] = p.hash;
        this.graft(p.live);
        p.seq.slot = p.replacement;
        p.seq.initialized = false;
        applied++;
      } else this.releaseLive(p.replacement);
    }
    for (const s of b.pins) this.unpin(s);
    return applied;
  }

  abortBatch(b: ModelBatch): void {
    for (const s of b.reservations) this.abort(s);
    for (const p of b.promotions) this.releaseLive(p.replacement);
    for (const s of b.pins) this.unpin(s);
  }

  /** The figures of the library's stats(). */
  stats() {
    const count = (st: SlotState) => this.state.filter((x, s) => s > 0 && x === st).length;
    return {
      freeSlots: this.free.length,
      liveSlots: count('live'),
      pendingSlots: count('pending'),
      committedCheckpoints: this.lru.size,
      pinnedCheckpoints: this.pins.filter((n) => n > 0).length,
      ...this.counters,
    };
  }

  /** Committed slots, least recent first. */
  lruOrder(): number[] {
    return [...this.lru.values()];
  }
}
