// The KV-cache store of a host-tier replay with `storeBlocks` (docs/replay.md,
// the store tier): a set of block chain hashes of bounded size, least
// recently used first out. Every block the host tier receives from the device
// is also written to the store; a prefill asks it for the blocks the host
// lacks, and it delivers the leading ones it holds.

import { PairTable } from '../pair-table.js';

/** What the store did over a replay. */
export interface KvStoreResult {
  /** Blocks the store holds at most. */
  storeBlocks: number;
  /** Blocks written to it (offloads; a block it held already is rewritten and counts again). */
  blocksWritten: number;
  /** Blocks asked for by prefetches (the host lacked them). */
  blocksRequested: number;
  /** Of those, blocks it delivered to the host. */
  blocksDelivered: number;
  /** Blocks dropped to make room. */
  blocksEvicted: number;
  /** Blocks held at the end. */
  blocksAtEnd: number;
}

/** No node (the end of the recency list, a hash not held). */
const NONE = -1;

/**
 * The store: the hashes in typed arrays, never one object per block (a
 * replay writes millions: a Map of string keys spent most of a store replay
 * in its own upkeep and the garbage collector). Nodes hold a hash (four
 * 32-bit words) and their neighbours in a recency list, least recent first;
 * a PairTable finds a hash's node. A chain hash is uniformly random, so its
 * first word is the table's hash: a probe and a miss read the table alone.
 */
export class ReplayKvStore {
  private readonly words: Uint32Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  /** Nodes by the first word of their hash (sized once: never more than half full). */
  private readonly table: PairTable;
  private head = NONE; // least recent
  private tail = NONE; // most recent
  private size = 0;
  private written = 0;
  private requested = 0;
  private delivered = 0;
  private evicted = 0;
  /** The hash looked up last, as words (read by find and insert). */
  private k0 = 0;
  private k1 = 0;
  private k2 = 0;
  private k3 = 0;

  constructor(readonly capacity: number) {
    this.words = new Uint32Array(capacity * 4);
    this.prev = new Int32Array(capacity);
    this.next = new Int32Array(capacity);
    let n = 2;
    while (n < capacity * 2) n *= 2;
    this.table = new PairTable(n);
  }

  /** Writes the blocks whose 16-byte hashes `hashes` holds, in order. */
  writeAll(hashes: Uint8Array): void {
    for (let at = 0; at < hashes.length; at += 16) this.writeAt(hashes, at);
  }

  /** Writes one block (it becomes the most recently used). */
  write(hash: Uint8Array): void {
    this.writeAt(hash, 0);
  }

  private writeAt(hash: Uint8Array, at: number): void {
    this.written++;
    const node = this.find(hash, at);
    if (node !== NONE) {
      this.toTail(node);
      return;
    }
    // A new node: the next unused one, or the least recent one's when full.
    let fresh = this.size;
    if (this.size >= this.capacity) {
      fresh = this.head;
      this.unlink(fresh);
      this.table.remove(fresh, this.words[fresh * 4]! | 0);
      this.evicted++;
    } else this.size++;
    const w = this.words;
    w[fresh * 4] = this.k0;
    w[fresh * 4 + 1] = this.k1;
    w[fresh * 4 + 2] = this.k2;
    w[fresh * 4 + 3] = this.k3;
    this.linkTail(fresh);
    this.table.insert(fresh, this.k0 | 0);
  }

  /**
   * Asked for the blocks whose 16-byte hashes `hashes` holds, in prompt
   * order: the count of leading ones it holds (each becomes the most
   * recently used). A prefetch delivers a prefix only.
   */
  deliver(hashes: Uint8Array): number {
    const asked = hashes.length >> 4;
    this.requested += asked;
    let n = 0;
    for (; n < asked; n++) {
      const node = this.find(hashes, n * 16);
      if (node === NONE) break;
      this.toTail(node);
    }
    this.delivered += n;
    return n;
  }

  /** The node holding `hash`, or NONE; leaves its words in k0..k3. */
  private find(h: Uint8Array, at: number): number {
    const k0 = (this.k0 = (h[at]! | (h[at + 1]! << 8) | (h[at + 2]! << 16) | (h[at + 3]! << 24)) >>> 0);
    const k1 = (this.k1 = (h[at + 4]! | (h[at + 5]! << 8) | (h[at + 6]! << 16) | (h[at + 7]! << 24)) >>> 0);
    const k2 = (this.k2 = (h[at + 8]! | (h[at + 9]! << 8) | (h[at + 10]! << 16) | (h[at + 11]! << 24)) >>> 0);
    const k3 = (this.k3 = (h[at + 12]! | (h[at + 13]! << 8) | (h[at + 14]! << 16) | (h[at + 15]! << 24)) >>> 0);
    const w = this.words;
    const { tab, mask } = this.table;
    const first = k0 | 0;
    for (let i = k0 & mask; ; i = (i + 1) & mask) {
      const v = tab[i * 2]!;
      if (v === 0) return NONE;
      if (tab[i * 2 + 1] !== first) continue;
      const b = (v - 1) * 4;
      if (w[b + 1] === k1 && w[b + 2] === k2 && w[b + 3] === k3) return v - 1;
    }
  }

  private unlink(node: number): void {
    const p = this.prev[node]!;
    const n = this.next[node]!;
    if (p === NONE) this.head = n;
    else this.next[p] = n;
    if (n === NONE) this.tail = p;
    else this.prev[n] = p;
  }

  private linkTail(node: number): void {
    this.prev[node] = this.tail;
    this.next[node] = NONE;
    if (this.tail === NONE) this.head = node;
    else this.next[this.tail] = node;
    this.tail = node;
  }

  private toTail(node: number): void {
    if (node === this.tail) return;
    this.unlink(node);
    this.linkTail(node);
  }

  /** @internal The hashes held, least recently used first (for tests). */
  contents(): Uint8Array[] {
    const out: Uint8Array[] = [];
    for (let n = this.head; n !== NONE; n = this.next[n]!) out.push(new Uint8Array(this.words.buffer, n * 16, 16).slice());
    return out;
  }

  result(): KvStoreResult {
    return {
      storeBlocks: this.capacity,
      blocksWritten: this.written,
      blocksRequested: this.requested,
      blocksDelivered: this.delivered,
      blocksEvicted: this.evicted,
      blocksAtEnd: this.size,
    };
  }
}
