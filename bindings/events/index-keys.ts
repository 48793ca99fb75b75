// The index's chain keys and who holds each: a table of 128-bit keys (4 u32
// words, XXH3-128 output) to the set of sources holding a block of that key,
// in typed arrays. A query walks its keys through here; a store or an
// eviction adds or takes one source. No object per key, and no string made
// of one. Keys are placed by a hash keyed with the index's secret
// (index-seed.ts): a stream chooses its tokens, and XXH3's seed here is
// public, so it could otherwise choose keys that share a home position.

import { PairTable } from '../pair-table.js';
import { drawSecret, keyedMix3 } from './index-seed.js';

const NONE = -1;

export class KeyHolders {
  /** Entry numbers by the key's keyed hash (probes compare it without reading the entry). */
  private readonly table = new PairTable();

  constructor(private readonly secret: Uint32Array = drawSecret()) {}

  private hashAt(w: Uint32Array, at: number): number {
    return keyedMix3(this.secret, w[at]!, w[at + 1]!, w[at + 2]! ^ w[at + 3]!);
  }

  /** Keys held. */
  get size(): number {
    return this.table.size;
  }

  /** Holder records in use. */
  get holderRecords(): number {
    return this.hHigh - this.freeHolders.length;
  }

  /** The longest distance of an entry from its home position. */
  longestProbe(): number {
    return this.table.longestProbe();
  }
  private cap = 0;
  private high = 0;
  private words = new Uint32Array(0);
  /** First holder record of an entry. */
  private first = new Int32Array(0);
  private freeEntries = new Int32Array(0);
  private nFreeEntries = 0;
  // Holder records: a source id and the next record of the same key.
  private hCap = 0;
  private hHigh = 0;
  private hSrc = new Int32Array(0);
  private hNext = new Int32Array(0);
  private freeHolders: number[] = [];

  /** The entry of the key at `w[at..at+4)`, or -1. */
  find(w: Uint32Array, at: number): number {
    const { tab, mask } = this.table;
    const words = this.words;
    const a = w[at]!;
    const b = w[at + 1]!;
    const c = w[at + 2]!;
    const d = w[at + 3]!;
    const h = keyedMix3(this.secret, a, b, c ^ d);
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const v = tab[2 * i]!;
      if (v === 0) return NONE;
      if (tab[2 * i + 1] !== h) continue;
      const q = (v - 1) * 4;
      if (words[q] === a && words[q + 1] === b && words[q + 2] === c && words[q + 3] === d) return v - 1;
    }
  }

  /** The first holder record of entry `e` (-1: none). */
  firstHolder(e: number): number {
    return this.first[e]!;
  }

  holderSource(h: number): number {
    return this.hSrc[h]!;
  }

  nextHolder(h: number): number {
    return this.hNext[h]!;
  }

  /** Source `src` holds the key at `w[at..]` (once, however many of its blocks have it). */
  hold(w: Uint32Array, at: number, src: number): void {
    let e = this.find(w, at);
    if (e === NONE) e = this.insert(w, at);
    for (let h = this.first[e]!; h !== NONE; h = this.hNext[h]!) if (this.hSrc[h] === src) return;
    const h = this.newHolder();
    this.hSrc[h] = src;
    this.hNext[h] = this.first[e]!;
    this.first[e] = h;
  }

  /** Source `src` no longer holds the key; a key nobody holds is forgotten. */
  unhold(w: Uint32Array, at: number, src: number): void {
    const e = this.find(w, at);
    if (e === NONE) return;
    let prev = NONE;
    for (let h = this.first[e]!; h !== NONE; prev = h, h = this.hNext[h]!) {
      if (this.hSrc[h] !== src) continue;
      if (prev === NONE) this.first[e] = this.hNext[h]!;
      else this.hNext[prev] = this.hNext[h]!;
      this.freeHolders.push(h);
      break;
    }
    if (this.first[e] === NONE) this.removeEntry(e);
  }

  private insert(w: Uint32Array, at: number): number {
    let e: number;
    if (this.nFreeEntries > 0) e = this.freeEntries[--this.nFreeEntries]!;
    else {
      if (this.high === this.cap) this.growEntries();
      e = this.high++;
    }
    this.words.set(w.subarray(at, at + 4), e * 4);
    this.first[e] = NONE;
    this.table.insert(e, this.hashAt(w, at));
    return e;
  }

  private removeEntry(e: number): void {
    this.table.remove(e, this.hashAt(this.words, e * 4));
    this.freeEntries[this.nFreeEntries++] = e;
  }

  private newHolder(): number {
    const h = this.freeHolders.pop();
    if (h !== undefined) return h;
    if (this.hHigh === this.hCap) {
      this.hCap = Math.max(1024, this.hCap * 2);
      const src = new Int32Array(this.hCap);
      src.set(this.hSrc);
      const next = new Int32Array(this.hCap);
      next.set(this.hNext);
      this.hSrc = src;
      this.hNext = next;
    }
    return this.hHigh++;
  }

  private growEntries(): void {
    this.cap = Math.max(1024, this.cap * 2);
    const words = new Uint32Array(this.cap * 4);
    words.set(this.words);
    const first = new Int32Array(this.cap);
    first.set(this.first);
    const free = new Int32Array(this.cap);
    free.set(this.freeEntries);
    this.words = words;
    this.first = first;
    this.freeEntries = free;
  }
}
