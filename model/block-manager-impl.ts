// Model of BlockManagerImpl: a free stack, reference counts and the prefix
// cache, in plain arrays and maps. Mirrors bindings/managers/block-manager-impl.ts.

import { blockKey } from './chain-key.js';
import { blockRetention, ModelPrefixCache, MODEL_DEFAULT_PRIORITY, type ModelEvictionPolicy, type ModelRetention } from './prefix-cache.js';
import { modelCheckInt32s, modelInt } from './validate.js';

/** A recorded event, by block id and key (the model's keys are not XXH3). */
export type ModelEvent =
  | { type: 'stored'; blockId: number; key: string; parentKey: string | null; tokenIds: number[]; salt: string | null }
  | { type: 'removed'; blockId: number; key: string }
  | { type: 'cleared' };

/** A manager's figures, field for field those of the library's BlockManagerStats. */
export interface ModelManagerStats {
  numFreeBlocks: number;
  numUsedBlocks: number;
  numBlocksInPrefixCache: number;
  numTotalBlocks: number;
  numEvictableBlocks: number;
  matchCalls: number;
  blocksQueried: number;
  blocksHit: number;
  blocksInserted: number;
  blocksEvicted: number;
  blocksAllocated: number;
  allocationFailures: number;
  peakUsedBlocks: number;
}

export interface ModelManagerOptions {
  numBlocks: number;
  blockSize: number;
  enablePrefixCache?: boolean;
  evictionPolicy?: ModelEvictionPolicy;
}

export class ModelBlockManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly prefixOn: boolean;
  /** Free stack; the last element is handed out next. */
  readonly free: number[] = [];
  /** References per id, the cache's included. */
  readonly ref: number[];
  /** The key stamped on each id by match/insert (until it is freed). */
  readonly stamp = new Map<number, string>();
  readonly prefix: ModelPrefixCache;
  /** Recorded events since the last drain. */
  readonly events: ModelEvent[] = [];
  recording = false;
  /** Cached ids announced by a stored event (a consumer knows them). */
  readonly told = new Set<number>();
  /** The most ids ever used at once (kept only with trackPeak: it costs a scan per step). */
  peakUsed = 0;
  trackPeak = false;
  /**
   * Check token arrays (O(tokens) per call). A pool turns this off for its
   * managers: it passes them tokens its sequences already checked.
   */
  checkTokens = true;
  /** Called with every id popped off the free stack, in order (the replay's id checksum watches this). */
  onPop: ((id: number) => void) | null = null;
  counters = { matchCalls: 0, blocksQueried: 0, blocksHit: 0, blocksInserted: 0, blocksEvicted: 0, blocksAllocated: 0, allocationFailures: 0 };

  constructor(o: ModelManagerOptions) {
    this.numBlocks = o.numBlocks;
    this.blockSize = o.blockSize;
    this.prefixOn = o.enablePrefixCache ?? true;
    this.prefix = new ModelPrefixCache(o.evictionPolicy ?? 'lru');
    this.ref = new Array(o.numBlocks).fill(0);
    for (let id = o.numBlocks - 1; id >= 0; id--) this.free.push(id);
    this.free.pop(); // id 0: padding
    this.ref[0] = 1;
  }

  private cachedCount(id: number): number {
    return this.prefix.keyOf.has(id) ? 1 : 0;
  }

  private release1(id: number): void {
    this.ref[id]!--;
    if (this.ref[id] === 0) {
      this.stamp.delete(id);
      this.free.push(id);
    }
  }

  allocate(n: number): number[] | null {
    modelInt('n', n);
    if (n > this.free.length && this.prefixOn) this.evict(n - this.free.length);
    if (n > this.free.length) {
      this.counters.allocationFailures++;
      return null;
    }
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const id = this.free.pop()!;
      this.ref[id] = 1;
      this.stamp.delete(id);
      out.push(id);
      this.onPop?.(id);
    }
    this.counters.blocksAllocated += n;
    this.notePeak();
    return out;
  }

  /** Throws (changing nothing) if some id has no holder besides the cache. */
  validateRelease(ids: number[]): void {
    modelCheckInt32s('ids', ids);
    const left = new Map<number, number>();
    ids.forEach((id, i) => {
      if (id <= 0 || id >= this.numBlocks) throw new RangeError(`ids[${i}] = ${id} is not a block id`);
      const h = left.get(id) ?? this.ref[id]! - this.cachedCount(id);
      if (h <= 0) throw new RangeError(`ids[${i}] = ${id} has no holder left`);
      left.set(id, h - 1);
    });
  }

  deallocate(ids: number[]): void {
    this.validateRelease(ids);
    for (const id of ids) this.release1(id);
  }

  retain(ids: number[]): void {
    modelCheckInt32s('ids', ids);
    ids.forEach((id, i) => {
      if (id <= 0 || id >= this.numBlocks || this.ref[id] === 0) throw new RangeError(`ids[${i}] = ${id} cannot be retained`);
    });
    for (const id of ids) this.ref[id]!++;
    this.notePeak();
  }

  private notePeak(): void {
    if (this.trackPeak) this.peakUsed = Math.max(this.peakUsed, this.numUsedBlocks());
  }

  evict(k: number): number {
    modelInt('n', k);
    let done = 0;
    if (this.prefix.policy !== 'lru') {
      for (; done < k; done++) {
        const id = this.prefix.victim((v) => this.ref[v] === 1);
        if (id === undefined) break;
        this.evictOne(this.prefix.keyOf.get(id)!, id);
      }
    } else {
      for (const [key, id] of this.prefix.entries) {
        if (done >= k) break;
        if (this.ref[id]! > 1) continue; // held by a sequence: skipped
        this.evictOne(key, id);
        done++;
      }
    }
    this.counters.blocksEvicted += done;
    return done;
  }

  private evictOne(key: string, id: number): void {
    if (this.recording && this.told.has(id)) this.events.push({ type: 'removed', blockId: id, key });
    this.told.delete(id);
    this.prefix.remove(key);
    this.release1(id);
  }

  /** The key of block `b` of `tokens`, given the key of block b-1 (the salt only counts for block 0). */
  private keyAt(parent: string | null, tokens: ArrayLike<number>, b: number, salt: string): string {
    return blockKey(parent, tokens, b, this.blockSize, salt);
  }

  /** The key of block `b - 1`: stamped on `parentId`, else computed from the tokens. */
  private parentKey(tokens: ArrayLike<number>, first: number, parentId: number, salt: string): string | null {
    if (first === 0) return null;
    const stamped = this.stamp.get(parentId);
    if (stamped !== undefined) return stamped;
    let key: string | null = null;
    for (let b = 0; b < first; b++) key = this.keyAt(key, tokens, b, salt);
    return key;
  }

  allocateShared(tokens: ArrayLike<number>, existing: number[] = [], salt = ''): number[] {
    if (this.checkTokens) modelCheckInt32s('tokens', tokens);
    modelCheckInt32s('existingShared', existing);
    const nFull = Math.floor(tokens.length / this.blockSize);
    if (existing.length > nFull) throw new RangeError(`model: ${existing.length} existing ids for ${nFull} full blocks`);
    existing.forEach((id, i) => {
      if (id <= 0 || id >= this.numBlocks || this.ref[id] === 0) throw new RangeError(`model: existingShared[${i}] = ${id} is not held`);
    });
    if (nFull <= existing.length) return []; // nothing to look up: not counted
    this.counters.matchCalls++;
    this.counters.blocksQueried += nFull - existing.length;
    if (!this.prefixOn) return [];
    let parent = this.parentKey(tokens, existing.length, existing[existing.length - 1] ?? 0, salt);
    const hits: number[] = [];
    const keys: string[] = [];
    for (let b = existing.length; b < nFull; b++) {
      const key = this.keyAt(parent, tokens, b, salt);
      const id = this.prefix.get(key);
      if (id === undefined) break;
      this.ref[id]!++;
      hits.push(id);
      keys.push(key);
      parent = key;
    }
    this.prefix.touchReversed(keys);
    this.counters.blocksHit += hits.length;
    this.notePeak();
    return hits;
  }

  cache(tokens: ArrayLike<number>, ids: number[], existing = 0, salt = '', retention: readonly ModelRetention[] = []): number {
    if (this.checkTokens) modelCheckInt32s('tokens', tokens);
    modelCheckInt32s('ids', ids);
    if (ids.length > Math.ceil(tokens.length / this.blockSize)) throw new RangeError(`model: ${ids.length} ids for ${tokens.length} tokens`);
    const n = Math.min(Math.floor(tokens.length / this.blockSize), ids.length);
    modelInt('existingSharedCount', existing, 0, n);
    ids.forEach((id, i) => {
      if (id <= 0 || id >= this.numBlocks || this.ref[id]! - this.cachedCount(id) <= 0) {
        throw new RangeError(`ids[${i}] = ${id} is not held`);
      }
    });
    if (!this.prefixOn) return 0;
    let parent = this.parentKey(tokens, existing, ids[existing - 1] ?? 0, salt);
    const visited: string[] = [];
    let added = 0;
    for (let b = existing; b < n; b++) {
      const key = this.keyAt(parent, tokens, b, salt);
      const id = ids[b]!;
      if (this.prefix.has(key)) {
        visited.push(key); // refreshed; the caller's duplicate block is not cached
        if (!this.prefix.keyOf.has(id)) this.stamp.set(id, key);
      } else if (!this.prefix.keyOf.has(id)) {
        this.prefix.add(key, id);
        this.ref[id]!++;
        this.stamp.set(id, key);
        if (this.recording) {
          // vLLM's rule: the chain parent, known to the consumer or not; block 0 has none (a salt instead).
          const tokenIds = Array.from(tokens).slice(b * this.blockSize, (b + 1) * this.blockSize);
          this.events.push({ type: 'stored', blockId: id, key, parentKey: parent, tokenIds, salt: b === 0 && salt !== '' ? salt : null });
          this.told.add(id);
        }
        visited.push(key);
        added++;
      } // else: the id is already cached under another key; not cached twice
      if (this.prefix.policy === 'priority' && visited[visited.length - 1] === key) {
        // Every block the insert visits takes this sequence's priority for it.
        const [p, d] = blockRetention(retention, b * this.blockSize, (b + 1) * this.blockSize);
        this.prefix.setPriority(key, p, this.prefix.now + d);
      }
      parent = key;
    }
    this.prefix.touchReversed(visited);
    this.counters.blocksInserted += added;
    return added;
  }

  /** The priority policy's clock (never backwards). */
  setTime(t: number): void {
    if (typeof t !== 'number') throw new TypeError('model: t is not a number');
    if (!(t >= this.prefix.now) || t === Infinity) throw new RangeError(`model: t ${t} is not a finite time from ${this.prefix.now} on`);
    this.prefix.now = t;
  }

  /** Caches ids[i] under keys[i] (insert by stamped key: blocks copied in from another tier). */
  cacheByKeys(ids: number[], keys: string[]): number {
    modelCheckInt32s('ids', ids);
    if (keys.length !== ids.length) throw new RangeError(`model: ${keys.length} keys for ${ids.length} ids`);
    ids.forEach((id, i) => {
      if (id <= 0 || id >= this.numBlocks || this.ref[id]! - this.cachedCount(id) <= 0) {
        throw new RangeError(`ids[${i}] = ${id} is not held`);
      }
    });
    if (!this.prefixOn) return 0;
    const visited: string[] = [];
    let added = 0;
    ids.forEach((id, b) => {
      const key = keys[b]!;
      if (this.prefix.has(key)) {
        visited.push(key);
        if (!this.prefix.keyOf.has(id)) this.stamp.set(id, key);
      } else if (!this.prefix.keyOf.has(id)) {
        this.prefix.add(key, id);
        this.ref[id]!++;
        this.stamp.set(id, key);
        visited.push(key);
        added++;
      }
    });
    if (this.prefix.policy === 'priority') for (const k of visited) this.prefix.setPriority(k, MODEL_DEFAULT_PRIORITY, Infinity);
    this.prefix.touchReversed(visited);
    this.counters.blocksInserted += added;
    return added;
  }

  /** How many leading full blocks of `tokens` (salted with `salt`) a match would hit; changes nothing. */
  peek(tokens: ArrayLike<number>, salt = ''): number {
    if (!this.prefixOn) return 0;
    const nFull = Math.floor(tokens.length / this.blockSize);
    let parent: string | null = null;
    let hits = 0;
    for (let b = 0; b < nFull; b++) {
      parent = this.keyAt(parent, tokens, b, salt);
      if (!this.prefix.has(parent)) break;
      hits++;
    }
    return hits;
  }

  isCached(id: number): boolean {
    return this.prefix.keyOf.has(id);
  }

  recordEvents(on: boolean): void {
    if (on && !this.recording) this.told.clear();
    this.recording = on;
  }

  drainEvents(): ModelEvent[] {
    return this.events.splice(0);
  }

  /** Evicts every evictable entry; a whole-cache clear is one "cleared" event. */
  resetPrefixCache(): number {
    const clear = this.recording && this.numEvictableBlocks() === this.prefix.size;
    if (clear) this.recording = false;
    const n = this.evict(this.numEvictableBlocks());
    if (clear) {
      this.recording = true;
      this.told.clear();
      this.events.push({ type: 'cleared' });
    }
    return n;
  }

  numFreeBlocks(): number {
    return this.free.length;
  }

  numUsedBlocks(): number {
    let used = 0;
    for (let id = 1; id < this.numBlocks; id++) if (this.ref[id]! - this.cachedCount(id) > 0) used++;
    return used;
  }

  numBlocksInPrefixCache(): number {
    return this.prefix.size;
  }

  /** Used / usable blocks (the padding block excluded). */
  kvCacheUtilization(): number {
    return this.numBlocks > 1 ? this.numUsedBlocks() / (this.numBlocks - 1) : 0;
  }

  /** The figures of BlockManagerStats (the peak is kept only with trackPeak). */
  stats(): ModelManagerStats {
    return {
      numFreeBlocks: this.free.length,
      numUsedBlocks: this.numUsedBlocks(),
      numBlocksInPrefixCache: this.prefix.size,
      numTotalBlocks: this.numBlocks - 1,
      numEvictableBlocks: this.numEvictableBlocks(),
      ...this.counters,
      peakUsedBlocks: this.peakUsed,
    };
  }

  numEvictableBlocks(): number {
    let n = 0;
    for (const id of this.prefix.entries.values()) if (this.ref[id] === 1) n++;
    return n;
  }

  /** State code of every id: 0 free, 1 held, 2 shared, 3 cached only, 4 padding. */
  blockStates(): number[] {
    const out = [4];
    for (let id = 1; id < this.numBlocks; id++) {
      const holders = this.ref[id]! - this.cachedCount(id);
      out.push(holders > 1 ? 2 : holders === 1 ? 1 : this.cachedCount(id) === 1 ? 3 : 0);
    }
    return out;
  }
}
