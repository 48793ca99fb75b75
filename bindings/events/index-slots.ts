// The blocks a KVEventIndex holds, as a struct of typed arrays: one slot per
// block, reused through a free list, so that following a long run allocates
// no object per block and leaves the garbage collector nothing to trace.
// Blocks are found by (source, engine hash) through an open-addressing table
// of slot numbers; blocks waiting for their parent are linked in a list per
// (source, parent hash); each source's blocks are linked in the order they
// were stored (what `blocks()` lists).
//
// An engine hash is three numbers: a form (HASH_U64: the wire's uint64 as two
// u32 halves; HASH_NAME: an interned name, `lo` its id) and two u32 halves.

import { PairTable } from '../pair-table.js';
import { drawSecret, keyedMix3 } from './index-seed.js';

export const HASH_U64 = 0;
export const HASH_NAME = 1;
/** The parent form of a sequence's first block. */
export const NO_PARENT = 2;

/** A source's share of the slots: its stored-order list and counts (KVEventIndex's sources extend it). */
export interface SlotOwner {
  readonly id: number;
  head: number;
  tail: number;
  /** Blocks held. */
  count: number;
  /** Of them, blocks waiting for their parent. */
  waiting: number;
}

/** Not in a waiting list (wPrev); the end of a list (wNext, next, prev). */
const NOT_WAITING = -2;
const NONE = -1;

/**
 * Slot numbers by (source, form, lo, hi); the key of an entry is read from
 * the slot's own fields (its hash, or with `byParent` its parent's hash).
 */
class SlotTable {
  private readonly table = new PairTable();

  constructor(
    private readonly s: BlockSlots,
    private readonly byParent: boolean,
    private readonly secret: Uint32Array,
  ) {}

  private hashOf(slot: number): number {
    const s = this.s;
    return this.byParent
      ? keyedMix3(this.secret, s.pLo[slot]!, s.pHi[slot]!, s.src[slot]! * 4 + s.pForm[slot]!)
      : keyedMix3(this.secret, s.hLo[slot]!, s.hHi[slot]!, s.src[slot]! * 4 + s.hForm[slot]!);
  }

  /** The longest distance of an entry from its home position (probes a lookup may walk). */
  longestProbe(): number {
    return this.table.longestProbe();
  }

  find(src: number, form: number, lo: number, hi: number): number {
    const s = this.s;
    const L = this.byParent ? s.pLo : s.hLo;
    const H = this.byParent ? s.pHi : s.hHi;
    const F = this.byParent ? s.pForm : s.hForm;
    const S = s.src;
    const { tab, mask } = this.table;
    const h = keyedMix3(this.secret, lo, hi, src * 4 + form);
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const v = tab[2 * i]!;
      if (v === 0) return NONE;
      if (tab[2 * i + 1] !== h) continue;
      const x = v - 1;
      if (L[x] === lo && H[x] === hi && S[x] === src && F[x] === form) return x;
    }
  }

  insert(slot: number): void {
    this.table.insert(slot, this.hashOf(slot));
  }

  /** `next` takes `slot`'s entry (the same key, so the same hash). */
  replace(slot: number, next: number): void {
    this.table.replace(slot, this.hashOf(slot), next);
  }

  remove(slot: number): void {
    this.table.remove(slot, this.hashOf(slot));
  }
}

export class BlockSlots {
  private cap = 0;
  private high = 0;
  src = new Int32Array(0);
  hLo = new Uint32Array(0);
  hHi = new Uint32Array(0);
  hForm = new Uint8Array(0);
  pLo = new Uint32Array(0);
  pHi = new Uint32Array(0);
  pForm = new Uint8Array(0);
  keyed = new Uint8Array(0);
  /** Copies of the block its source announced and has not removed (KVEventIndex's countCopies; else 1). */
  copies = new Uint32Array(0);
  /** The index's chain key of a keyed block: 4 u32 words per slot. */
  key = new Uint32Array(0);
  /** B tokens per slot. */
  tokens = new Int32Array(0);
  private prev = new Int32Array(0);
  private next = new Int32Array(0);
  private wPrev = new Int32Array(0);
  private wNext = new Int32Array(0);
  private free = new Int32Array(0);
  private nFree = 0;
  /** The extra keys of a first block that has some (a salt). */
  readonly extras = new Map<number, readonly unknown[]>();
  private readonly byHash: SlotTable;
  private readonly waitingFor: SlotTable;

  /** `B`: tokens per block; `secret`: the tables' hash key (index-seed.ts), drawn when not given. */
  constructor(
    readonly B: number,
    secret: Uint32Array = drawSecret(),
  ) {
    this.byHash = new SlotTable(this, false, secret);
    this.waitingFor = new SlotTable(this, true, secret);
  }

  /** Slots in use (blocks held by every owner). */
  get used(): number {
    return this.high - this.nFree;
  }

  /** The longest probe run of the two tables (a flood shows here). */
  longestProbe(): number {
    return Math.max(this.byHash.longestProbe(), this.waitingFor.longestProbe());
  }

  /** The block of `owner` with this hash, or -1. */
  find(owner: number, form: number, lo: number, hi: number): number {
    return this.byHash.find(owner, form, lo, hi);
  }

  /** Stores a block (its hash not held by `owner` yet), unkeyed, at the end of `owner`'s list. */
  add(owner: SlotOwner, form: number, lo: number, hi: number, pForm: number, pLo: number, pHi: number, tokens: ArrayLike<number>, at: number, extra: readonly unknown[] | null): number {
    const x = this.alloc();
    this.src[x] = owner.id;
    this.hForm[x] = form;
    this.hLo[x] = lo;
    this.hHi[x] = hi;
    this.pForm[x] = pForm;
    this.pLo[x] = pLo;
    this.pHi[x] = pHi;
    this.keyed[x] = 0;
    this.copies[x] = 1;
    const B = this.B;
    const t = this.tokens;
    if (tokens instanceof Int32Array) t.set(tokens.subarray(at, at + B), x * B);
    else for (let i = 0; i < B; i++) t[x * B + i] = tokens[at + i]!;
    if (extra !== null) this.extras.set(x, extra);
    this.wPrev[x] = NOT_WAITING;
    this.next[x] = NONE;
    this.prev[x] = owner.tail;
    if (owner.tail === NONE) owner.head = x;
    else this.next[owner.tail] = x;
    owner.tail = x;
    owner.count++;
    this.byHash.insert(x);
    return x;
  }

  /** Forgets block `x` of `owner` (unlinks it from its waiting list, if in one). */
  remove(owner: SlotOwner, x: number): void {
    if (this.wPrev[x] !== NOT_WAITING) this.unwait(owner, x);
    this.byHash.remove(x);
    const p = this.prev[x]!;
    const n = this.next[x]!;
    if (p === NONE) owner.head = n;
    else this.next[p] = n;
    if (n === NONE) owner.tail = p;
    else this.prev[n] = p;
    owner.count--;
    this.extras.delete(x);
    this.src[x] = NONE;
    this.free[this.nFree++] = x;
  }

  /** The slot after `x` in its owner's list (-1 at the end). */
  after(x: number): number {
    return this.next[x]!;
  }

  /** Links unkeyed block `x` (it has a parent) into the list of blocks waiting for that parent. */
  wait(owner: SlotOwner, x: number): void {
    const h = this.waitingFor.find(owner.id, this.pForm[x]!, this.pLo[x]!, this.pHi[x]!);
    if (h === NONE) {
      this.wPrev[x] = NONE;
      this.wNext[x] = NONE;
      this.waitingFor.insert(x);
    } else {
      // After the head: the head keeps the table's entry.
      const n = this.wNext[h]!;
      this.wNext[x] = n;
      this.wPrev[x] = h;
      if (n !== NONE) this.wPrev[n] = x;
      this.wNext[h] = x;
    }
    owner.waiting++;
  }

  private unwait(owner: SlotOwner, x: number): void {
    const p = this.wPrev[x]!;
    const n = this.wNext[x]!;
    if (p === NONE) {
      if (n === NONE) this.waitingFor.remove(x);
      else {
        this.waitingFor.replace(x, n);
        this.wPrev[n] = NONE;
      }
    } else {
      this.wNext[p] = n;
      if (n !== NONE) this.wPrev[n] = p;
    }
    this.wPrev[x] = NOT_WAITING;
    owner.waiting--;
  }

  /** Takes every block of `owner` waiting for the parent (form, lo, hi) out of waiting; pushes their slots to `out`. */
  takeWaiting(owner: SlotOwner, form: number, lo: number, hi: number, out: number[]): void {
    const head = this.waitingFor.find(owner.id, form, lo, hi);
    if (head === NONE) return;
    this.waitingFor.remove(head);
    for (let c = head; c !== NONE; ) {
      const n = this.wNext[c]!;
      this.wPrev[c] = NOT_WAITING;
      owner.waiting--;
      out.push(c);
      c = n;
    }
  }

  private alloc(): number {
    if (this.nFree > 0) return this.free[--this.nFree]!;
    if (this.high === this.cap) this.grow();
    return this.high++;
  }

  private grow(): void {
    const cap = Math.max(1024, this.cap * 2);
    const more = <T extends Int32Array | Uint32Array | Uint8Array>(a: T, per = 1): T => {
      const b = new (a.constructor as new (n: number) => T)(cap * per);
      b.set(a);
      return b;
    };
    this.src = more(this.src);
    this.hLo = more(this.hLo);
    this.hHi = more(this.hHi);
    this.hForm = more(this.hForm);
    this.pLo = more(this.pLo);
    this.pHi = more(this.pHi);
    this.pForm = more(this.pForm);
    this.keyed = more(this.keyed);
    this.copies = more(this.copies);
    this.key = more(this.key, 4);
    this.tokens = more(this.tokens, this.B);
    this.prev = more(this.prev);
    this.next = more(this.next);
    this.wPrev = more(this.wPrev);
    this.wNext = more(this.wNext);
    this.free = more(this.free);
    this.cap = cap;
  }
}
