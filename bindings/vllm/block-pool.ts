// The handle on one vLLM block pool of the Wasm core (assembly/vllm-pool.ts):
// the free queue, the references, each block's key and the key table. It
// goes through the core instance it was made on for every read and write,
// and throws once disposed. Its operations take block tables and keys that
// live in linear memory (the KV-cache manager owns them): one crossing each.

import {
  CHECK_HOLDERS, ERR_CACHED, ERR_COUNT, ERR_DUPLICATE, ERR_NOT_HELD, ERR_OUT_OF_RANGE, ERR_PADDING, HDR_GEN, VP_EVENT_KEY, VP_EVENT_SIZE, VP_NO_ROOM,
  VP_STAT_ALLOCATED, VP_STAT_CACHED, VP_STAT_CHECKSUM, VP_STAT_COUNT, VP_STAT_EVICTED, VP_STAT_FREE, VP_STAT_FREE_UNCACHED, VP_STAT_KEYS, VP_STAT_STORED,
} from '../core/abi.js';
import { CHECK_MESSAGES } from '../core/abi-names.js';
import type { CoreInstance } from '../core/core-instance.js';
import type { CoreExports } from '../core/exports.js';
import { plainCore } from '../core/plain-core.js';
import { exhaustedDoing } from '../managers/core-manager.js';
import { checkInt } from '../validate.js';

/** A vLLM pool's figures (docs/engines.md, figures). */
export interface VllmPoolStats {
  /** The free queue's length: never-used and cached-free blocks. */
  numFreeBlocks: number;
  /** Blocks with a key, held or free. */
  numCachedBlocks: number;
  /** Distinct keys (duplicates share one). */
  numCachedKeys: number;
  /** Free blocks without a key. */
  numFreeUncachedBlocks: number;
  /** Ids popped from the queue (the null block excluded). */
  allocatedBlocks: number;
  /** Keys dropped when their block was popped again. */
  evictedBlocks: number;
  /** Blocks cached. */
  storedBlocks: number;
  /** h = (h * 31 + id) mod 2^32 over the ids popped, in order. */
  idChecksum: number;
}

/** One eviction the pool logged: the block popped and the key it lost. */
export interface VllmEviction {
  blockId: number;
  key: Uint8Array;
}

/** Thrown by an operation the core refused (a bug of the caller: the pool is unchanged). */
function coreError(code: number, what: string, ex: CoreExports): Error {
  const i = ex.mgr_error_index();
  switch (code) {
    case ERR_COUNT:
      return new RangeError(`kvpool: ${what}: a count is past what the block table holds`);
    case ERR_OUT_OF_RANGE:
      return new RangeError(`kvpool: ${what}: block ${i} of the list is not a block of this pool`);
    case ERR_PADDING:
      return new RangeError(`kvpool: ${what}: block ${i} of the list is the null block`);
    case ERR_NOT_HELD:
      return new RangeError(`kvpool: ${what}: block ${i} of the list has no reference to drop`);
    case ERR_DUPLICATE:
      return new RangeError(`kvpool: ${what}: block ${i} of the list is there twice`);
    case ERR_CACHED:
      return new RangeError(`kvpool: ${what}: block ${i} of the table is cached already`);
    default:
      return new Error(`kvpool: unexpected core error ${code} in ${what}`);
  }
}

export class VllmBlockPool {
  /** Blocks, the null block 0 included. */
  readonly numBlocks: number;
  /** @internal header pointer (unsigned) */
  readonly ptr: number;
  /** @internal the header's generation */
  readonly gen: number;
  /** @internal */
  readonly rt: CoreInstance;
  private readonly ex: CoreExports;
  private disposed = false;
  private recording = false;
  private statsAt = 0;

  /** A pool of `numBlocks` blocks (at least 2: block 0 is the null block), in the process's plain core unless `rt` is given. */
  constructor(numBlocks: number, rt?: CoreInstance) {
    this.numBlocks = checkInt('numBlocks', numBlocks, 2);
    this.rt = rt ?? plainCore();
    this.rt.live();
    this.ex = this.rt.ex;
    const ptr = this.rt.growing((e) => e.vp_create(numBlocks)) >>> 0;
    if (ptr === 0) throw new RangeError(exhaustedDoing(this.rt, `creating a vLLM pool of ${numBlocks} blocks`, this.ex.vp_region_bytes(numBlocks)));
    this.ptr = ptr;
    this.gen = Atomics.load(this.rt.u32, (ptr + HDR_GEN) >>> 2);
  }

  /** Throws once disposed. */
  live(): void {
    if (this.disposed) throw new Error('kvpool: this VllmBlockPool was disposed; it cannot be used any more');
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  numFreeBlocks(): number {
    this.live();
    return this.ex.vp_num_free(this.ptr);
  }

  /** @internal get_computed_blocks: `n` keys at `keys`, hit ids to `out`; returns how many. */
  lookup(keys: number, n: number, out: number): number {
    this.live();
    return this.ex.vp_lookup(this.ptr, keys, n, out);
  }

  /** @internal allocate_slots on a block table in linear memory (assembly/vllm-pool.ts); the new length, or -1 when the queue is short. */
  allocate(table: number, cap: number, held: number, hits: number, need: number, mustFit: number, keys: number, cacheFrom: number, cacheTo: number): number {
    this.live();
    const r = this.recording
      ? this.rt.growing((e) => e.vp_allocate(this.ptr, table, cap, held, hits, need, mustFit, keys, cacheFrom, cacheTo))
      : this.ex.vp_allocate(this.ptr, table, cap, held, hits, need, mustFit, keys, cacheFrom, cacheTo);
    if (r < VP_NO_ROOM) throw coreError(r, 'allocating slots', this.ex);
    return r;
  }

  /** @internal free_blocks of a table's `n` blocks, last first. */
  free(table: number, n: number): void {
    this.live();
    const r = this.ex.vp_free(this.ptr, table, n);
    if (r !== 0) throw coreError(r, 'freeing blocks', this.ex);
  }

  stats(): VllmPoolStats {
    this.live();
    if (this.statsAt === 0) this.statsAt = this.rt.alloc(VP_STAT_COUNT * 8);
    if (this.statsAt === 0) throw new RangeError('kvpool: Wasm memory exhausted reading a vLLM pool\'s figures');
    this.ex.vp_stats(this.ptr, this.statsAt);
    const f = this.rt.views().f64;
    const at = this.statsAt >>> 3;
    return {
      numFreeBlocks: f[at + VP_STAT_FREE]!,
      numCachedBlocks: f[at + VP_STAT_CACHED]!,
      numCachedKeys: f[at + VP_STAT_KEYS]!,
      numFreeUncachedBlocks: f[at + VP_STAT_FREE_UNCACHED]!,
      allocatedBlocks: f[at + VP_STAT_ALLOCATED]!,
      evictedBlocks: f[at + VP_STAT_EVICTED]!,
      storedBlocks: f[at + VP_STAT_STORED]!,
      idChecksum: f[at + VP_STAT_CHECKSUM]!,
    };
  }

  /**
   * Audits the whole pool (the queue's links and length, references, the
   * key table and each key's blocks); with `holders` (per block, how many
   * request tables hold it) also that every block's references are exactly
   * those. Throws naming the broken invariant.
   */
  check(holders?: Int32Array): void {
    this.live();
    const code = this.ex.vp_check(this.ptr);
    if (code !== 0) throw new Error(`kvpool: vLLM pool audit failed: ${CHECK_MESSAGES[code] ?? `code ${code}`} (block ${this.ex.mgr_error_index()})`);
    if (holders === undefined) return;
    if (holders.length !== this.numBlocks) throw new RangeError(`holders must have ${this.numBlocks} entries, got ${holders.length}`);
    const p = this.rt.staging.stageIds(holders);
    if (this.ex.vp_check_holders(this.ptr, p) !== 0) {
      const id = this.ex.mgr_error_index();
      throw new Error(`kvpool: vLLM pool audit failed: ${CHECK_MESSAGES[CHECK_HOLDERS]} (block ${id}: ${holders[id]} held, references differ)`);
    }
  }

  /** Starts (true) or stops logging evictions (BlockRemoved events); stopping forgets the log. */
  recordEvictions(on: boolean): void {
    this.live();
    this.ex.vp_events_record(this.ptr, on ? 1 : 0);
    this.recording = on;
  }

  /** The evictions logged since the last drain, in the order they happened, and forgets them. */
  drainEvictions(out: VllmEviction[] = []): VllmEviction[] {
    this.live();
    const n = this.ex.vp_events_len(this.ptr);
    if (n < 0) {
      this.ex.vp_events_clear(this.ptr);
      throw new RangeError('kvpool: vLLM pool events were lost: Wasm memory ran out, or more than 1 GiB of them waited to be drained');
    }
    const base = this.ex.vp_events_ptr(this.ptr) >>> 0;
    const { i32, u8 } = this.rt.views();
    for (let k = 0; k < n; k++) {
      const e = base + k * VP_EVENT_SIZE;
      out.push({ blockId: i32[e >>> 2]!, key: u8.slice(e + VP_EVENT_KEY, e + VP_EVENT_KEY + 16) });
    }
    this.ex.vp_events_clear(this.ptr);
    return out;
  }

  /** Gives the pool's memory back; every later call throws. May be called again. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.rt.release(this.statsAt);
    this.ex.vp_destroy(this.ptr);
  }
}
