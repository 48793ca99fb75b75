// Model of vLLM v1's block pool (docs/engines.md, the vLLM engine), written
// for clarity: one FIFO queue holds every block nothing references, the
// never-used ones and the cached ones alike; a hash map takes a key to the
// blocks cached under it, oldest first, duplicates allowed. The Wasm core's
// twin (assembly/vllm-pool.ts) keeps the same state in flat arrays.
//
// The rules, each one what vLLM's BlockPool does:
// 1. Blocks 0..N-1 start in the queue in id order; block 0 is taken at once
//    as the null block and is never queued, referenced, cached or freed.
// 2. A lookup walks a request's keys from the first and stops at the first
//    key not cached; for a key cached on several blocks it gives the oldest
//    one still there. It changes nothing.
// 3. Touching a block adds a reference; a block that had none leaves the queue.
// 4. New blocks are popped from the head of the queue; a popped block that
//    still has a key is evicted then (the key leaves the map), not before.
// 5. A block is cached (given a key) when it is full of scheduled tokens,
//    even if the key is cached on another block already.
// 6. Freeing drops one reference from each block of a list; the blocks left
//    with none go to the tail of the queue, in the list's order, keeping
//    their keys.

import { modelInt } from '../validate.js';

/** What the model records as vLLM would publish it: a BlockStored when a block is cached, a BlockRemoved when it is evicted. */
export interface ModelVllmEvent {
  kind: 'stored' | 'removed';
  blockId: number;
  key: string;
}

/**
 * A queue of block ids that also takes one out of the middle: each queued id
 * knows its neighbours (as vLLM's blocks do). Iterates head first.
 */
export class FreeQueue {
  private readonly prev = new Map<number, number | null>();
  private readonly next = new Map<number, number | null>();
  private head: number | null = null;
  private tail: number | null = null;

  get size(): number {
    return this.next.size;
  }

  has(id: number): boolean {
    return this.next.has(id);
  }

  /** Appends `id` at the tail. */
  add(id: number): void {
    if (this.has(id)) throw new Error(`model: block ${id} is queued already`);
    this.prev.set(id, this.tail);
    this.next.set(id, null);
    if (this.tail === null) this.head = id;
    else this.next.set(this.tail, id);
    this.tail = id;
  }

  delete(id: number): void {
    if (!this.has(id)) throw new Error(`model: block ${id} is not queued`);
    const p = this.prev.get(id)!;
    const n = this.next.get(id)!;
    if (p === null) this.head = n;
    else this.next.set(p, n);
    if (n === null) this.tail = p;
    else this.prev.set(n, p);
    this.prev.delete(id);
    this.next.delete(id);
  }

  *[Symbol.iterator](): IterableIterator<number> {
    for (let id = this.head; id !== null; id = this.next.get(id)!) yield id;
  }
}

export class ModelVllmBlockPool {
  readonly numBlocks: number;
  /** References per block (the null block's stays 0 and is never used). */
  readonly ref: number[];
  /** The key a block is cached under, or null. */
  readonly key: Array<string | null>;
  /** The free queue, head first. */
  readonly queue = new FreeQueue();
  /** key -> the blocks cached under it, oldest first. */
  readonly cached = new Map<string, number[]>();
  /** Ids popped from the queue, in order (the null block excluded). */
  allocated = 0;
  /** h = (h * 31 + id) mod 2^32 over every id popped, in order. */
  checksum = 0;
  /** Keys dropped when their block was popped (vLLM's BlockRemoved events). */
  evicted = 0;
  /** Blocks cached (vLLM's BlockStored hashes). */
  stored = 0;
  /** Events, oldest first, when recording. */
  events: ModelVllmEvent[] | null = null;

  constructor(numBlocks: number) {
    this.numBlocks = modelInt('numBlocks', numBlocks, 2);
    this.ref = new Array<number>(numBlocks).fill(0);
    this.key = new Array<string | null>(numBlocks).fill(null);
    for (let id = 1; id < numBlocks; id++) this.queue.add(id);
  }

  /** The free queue's length (vLLM's get_num_free_blocks): never-used and cached-free blocks. */
  numFree(): number {
    return this.queue.size;
  }

  /** Rule 2: the blocks of the longest cached prefix of `keys`, at most `maxBlocks`. */
  lookup(keys: readonly string[], maxBlocks: number): number[] {
    const out: number[] = [];
    for (let b = 0; b < Math.min(keys.length, maxBlocks); b++) {
      const blocks = this.cached.get(keys[b]!);
      if (blocks === undefined) break;
      out.push(blocks[0]!);
    }
    return out;
  }

  /** Blocks of `ids` that sit in the queue (a hit on them takes a queue slot when touched). */
  inQueue(ids: readonly number[]): number {
    return ids.filter((id) => this.ref[id] === 0).length;
  }

  /** Rule 3. */
  touch(ids: readonly number[]): void {
    for (const id of ids) {
      if (this.ref[id] === 0) this.queue.delete(id);
      this.ref[id]!++;
    }
  }

  /** Rule 4: `n` blocks from the head of the queue, each with one reference. */
  getNewBlocks(n: number): number[] {
    if (n > this.queue.size) throw new RangeError(`model: ${n} blocks asked of a queue of ${this.queue.size}`);
    const out: number[] = [];
    for (const id of this.queue) {
      if (out.length === n) break;
      out.push(id);
    }
    for (const id of out) {
      this.queue.delete(id);
      const k = this.key[id];
      if (k !== null) this.uncache(id, k);
      this.ref[id] = 1;
      this.allocated++;
      this.checksum = (this.checksum * 31 + id) % 2 ** 32;
    }
    return out;
  }

  /** Rule 5. */
  cache(id: number, key: string): void {
    if (this.key[id] !== null) throw new Error(`model: block ${id} is cached already`);
    this.key[id] = key;
    const blocks = this.cached.get(key);
    if (blocks === undefined) this.cached.set(key, [id]);
    else blocks.push(id);
    this.stored++;
    this.events?.push({ kind: 'stored', blockId: id, key });
  }

  /** Rule 6: `ids` in eviction order (vLLM passes a request's blocks last first). */
  free(ids: readonly number[]): void {
    for (const id of ids) {
      if (!(this.ref[id]! > 0)) throw new Error(`model: block ${id} is freed but holds no reference`);
      this.ref[id]!--;
    }
    for (const id of ids) if (this.ref[id] === 0 && id !== 0) this.queue.add(id);
  }

  private uncache(id: number, key: string): void {
    const blocks = this.cached.get(key)!;
    blocks.splice(blocks.indexOf(id), 1);
    if (blocks.length === 0) this.cached.delete(key);
    this.key[id] = null;
    this.evicted++;
    this.events?.push({ kind: 'removed', blockId: id, key });
  }

  /** Blocks that still have a key (cached), and the distinct keys. */
  cachedBlocks(): number {
    return this.key.filter((k) => k !== null).length;
  }

  /** Throws when an invariant is broken: the queue holds exactly the unreferenced blocks, the map exactly the keyed ones. */
  check(): void {
    if (this.ref[0] !== 0 || this.key[0] !== null || this.queue.has(0)) throw new Error('model: the null block was used');
    for (let id = 1; id < this.numBlocks; id++) {
      const r = this.ref[id]!;
      if (r < 0) throw new Error(`model: block ${id} has ${r} references`);
      if ((r === 0) !== this.queue.has(id)) throw new Error(`model: block ${id} has ${r} references and is${this.queue.has(id) ? '' : ' not'} queued`);
      const k = this.key[id];
      if (k !== null && !this.cached.get(k)?.includes(id)) throw new Error(`model: block ${id} has a key the map does not list it under`);
    }
    let listed = 0;
    for (const [k, blocks] of this.cached) {
      if (blocks.length === 0) throw new Error('model: an empty entry in the map');
      for (const id of blocks) if (this.key[id] !== k) throw new Error(`model: the map lists block ${id} under a key it does not have`);
      listed += blocks.length;
    }
    if (listed !== this.cachedBlocks()) throw new Error('model: the map and the blocks disagree on what is cached');
  }
}
