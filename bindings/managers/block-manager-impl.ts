// BlockManagerImpl (docs/managers.md): free stack + prefix cache + padding id 0.

import { copyInt32 } from '../core/views.js';
import { loadCore } from '../core/plain-core.js';
import { checkBool, checkInt, checkInt32Array, checkKeys, checkObject, checkSeed, describe } from '../validate.js';
import type { BlockManager } from './block-manager.js';
import type { CoreInstance } from '../core/core-instance.js';
import { CoreManager, exhaustedDoing } from './core-manager.js';
import { AUX_SIZE, POLICY_PRIORITY } from '../core/abi.js';
import { throwIdError } from './core-errors.js';
import { parseRetention, rangeFrom, rangeTo, writeRetention, type Retention, type RetentionRange } from './retention.js';
import { EVICTION_POLICIES, parseEvictionPolicy, type EvictionPolicy } from './eviction-policy.js';

export interface BlockManagerOptions {
  /** Physical blocks, padding id 0 included (>= 2). */
  numBlocks: number;
  /** Tokens per block (>= 1). */
  blockSize: number;
  /** Keep a prefix cache of full blocks (default true). */
  enablePrefixCache?: boolean;
  /** XXH3-128 seed of the block hash chain (default 1024). */
  seed?: number | bigint;
  /** Which cached block is evicted first: 'lru' (default, the reference's order), 'lfu' or 'priority'. */
  evictionPolicy?: EvictionPolicy;
}

export const MANAGER_OPTION_KEYS = ['numBlocks', 'blockSize', 'enablePrefixCache', 'seed', 'evictionPolicy'] as const;

/**
 * @internal Where and how a manager is made beyond its options: in a given
 * core instance, or holding only its padding block (a composite's derived
 * sub-manager, as the reference builds it).
 */
export interface ManagerPlacement {
  rt?: CoreInstance;
  /** Fewest physical blocks accepted (default 2; 1: padding only, every allocation fails). */
  minBlocks?: 1 | 2;
}

/** Validated options in the form the core takes. */
export function parseManagerOptions(opts: BlockManagerOptions, name = 'options', minBlocks = 2) {
  checkObject(name, opts);
  checkKeys(name, opts, MANAGER_OPTION_KEYS);
  const numBlocks = checkInt(`${name}.numBlocks`, opts.numBlocks, minBlocks);
  const blockSize = checkInt(`${name}.blockSize`, opts.blockSize, 1);
  const prefixOn = opts.enablePrefixCache === undefined ? true : checkBool(`${name}.enablePrefixCache`, opts.enablePrefixCache);
  const seed = checkSeed(`${name}.seed`, opts.seed ?? 1024);
  const policy = parseEvictionPolicy(`${name}.evictionPolicy`, opts.evictionPolicy);
  if (policy !== 0 && !prefixOn) throw new RangeError(`${name}.evictionPolicy cannot be '${opts.evictionPolicy}' without a prefix cache`);
  return { numBlocks, blockSize, prefixOn, seedLo: seed.lo, seedHi: seed.hi, policy };
}

/**
 * Bytes a policy other than LRU adds to a manager of `n` blocks, as the
 * core's mgr_set_policy allocates them: under LFU a key and list links per
 * id (4 + 8), under priority also an expiry-heap entry, a batch key and the
 * retention fields (4 + 16 + AUX_SIZE).
 */
function policyBytes(policy: number, n: number): number {
  return n * (12 + (policy === POLICY_PRIORITY ? 4 + 16 + AUX_SIZE : 0));
}

export class BlockManagerImpl extends CoreManager implements BlockManager {
  readonly enablePrefixCache: boolean;

  /** Synchronous once the core is loaded (always in Node); see `create` otherwise. */
  constructor(options: BlockManagerOptions, /** @internal */ placement?: ManagerPlacement) {
    const cfg = parseManagerOptions(options, 'options', placement?.minBlocks);
    super({ ...cfg, rt: placement?.rt });
    this.enablePrefixCache = cfg.prefixOn;
    if (cfg.policy !== 0) {
      const code = this.rt.growing((e) => e.mgr_set_policy(this.ptr, cfg.policy));
      if (code !== 0) {
        this.ex.mgr_destroy(this.ptr); // not dispose(): a subclass is not constructed yet
        throw new RangeError(
          code === -2
            ? exhaustedDoing(this.rt, `setting up the '${options.evictionPolicy}' eviction policy on a manager of ${cfg.numBlocks} blocks`, policyBytes(cfg.policy, cfg.numBlocks))
            : `options.evictionPolicy: this manager's cache is not empty; its policy cannot change`,
        );
      }
    }
  }

  /** The clock of the 'priority' policy's retentions (starts at 0; see setTime). */
  get time(): number {
    this.live();
    return this.ex.mgr_time(this.ptr);
  }

  /**
   * Moves the clock to `t` (any unit; never backwards). Under the 'priority'
   * policy every block whose retention ended by `t` falls back to priority 35.
   */
  setTime(t: number): void {
    this.live();
    if (typeof t !== 'number') throw new TypeError(`t must be a number, got ${describe(t)}`);
    const now = this.time;
    if (!(t >= now) || t === Infinity) throw new RangeError(`t must be a finite time >= the current time ${now}, got ${t}`);
    this.ex.mgr_set_time(this.ptr, t);
  }

  /**
   * @internal Stages the priorities the next insert gives blocks
   * first..first+n (batch positions 0..n-1); a no-op unless the policy is 'priority'.
   */
  stageRetention(ranges: readonly Retention[], first: number, n: number): void {
    this.live();
    if (ranges.length === 1) {
      // The replay's case (one range per sequence): the core writes the
      // batch, 16 bytes per block, where writeRetention writes two f64
      // each. Positions relative to `first`, clamped to the batch.
      const r = ranges[0]!;
      const lim = Math.min(n, this.numBlocks);
      const from = Math.min(rangeFrom(r, first, this.blockSize) - first, lim);
      const to = Math.min(Math.max(rangeTo(r, first, n, this.blockSize) - first, from), lim);
      this.ex.mgr_stage_retention(this.ptr, lim, from, to, r.priority, this.time + r.duration);
      return;
    }
    const p = this.ex.mgr_batch_ptr(this.ptr);
    if (p === 0 || ranges.length === 0) return;
    writeRetention(ranges, first, Math.min(n, this.numBlocks), this.blockSize, this.time, this.mem.f64, p >>> 3);
  }

  /** @internal insertFrom with the blocks' priorities staged first (one step for the concurrent manager's lock). */
  insertWithRetention(
    ranges: readonly Retention[], tokens: ArrayLike<number>, ids: ArrayLike<number>, first: number, nBlocks: number, parentId: number,
    salt: Uint8Array | null,
  ): number {
    this.stageRetention(ranges, first, nBlocks);
    return this.insertFrom(tokens, ids, first, nBlocks, parentId, salt);
  }

  /** The eviction policy (kept in the core's header, so attached managers see their creator's). */
  get evictionPolicy(): EvictionPolicy {
    this.live();
    return EVICTION_POLICIES[this.ex.mgr_policy(this.ptr)]!;
  }

  /** Loads the Wasm core if needed, then creates the manager. */
  static async create(options: BlockManagerOptions): Promise<BlockManagerImpl> {
    parseManagerOptions(options);
    await loadCore();
    return new BlockManagerImpl(options);
  }

  allocateShared(tokens: ArrayLike<number>, existingShared: ArrayLike<number> = []): Int32Array {
    this.live();
    const toks = checkInt32Array('tokens', tokens);
    const existing = checkInt32Array('existingShared', existingShared);
    const B = this.blockSize;
    const nFull = Math.floor(toks.length / B);
    if (existing.length > nFull) {
      throw new RangeError(
        `existingShared has ${existing.length} ids but tokens hold only ${nFull} full blocks of ${B}`,
      );
    }
    this.checkHeld(existing, 'existingShared');
    const n = nFull - existing.length;
    if (this.matchOut.length < n) this.matchOut = new Int32Array(Math.max(n, this.matchOut.length * 2));
    const parent = existing.length > 0 ? existing[existing.length - 1]! : 0;
    const hits = this.matchInto(toks, existing.length, n, parent, this.matchOut, 0);
    return copyInt32(this.matchOut, 0, hits);
  }

  /** Hits land here first: one result array per call, sized to the hits. */
  private matchOut = new Int32Array(64);

  /**
   * Caches the full blocks of `tokens` held in `ids` after the first
   * `existingSharedCount`. `retention` (token ranges with priorities) has an
   * effect under the 'priority' policy only: see RetentionRange.
   */
  cache(tokens: ArrayLike<number>, ids: ArrayLike<number>, existingSharedCount = 0, retention?: readonly RetentionRange[]): number {
    this.live();
    const toks = checkInt32Array('tokens', tokens);
    const list = checkInt32Array('ids', ids);
    const ranges = retention === undefined ? null : parseRetention('retention', retention);
    const B = this.blockSize;
    const maxIds = Math.ceil(toks.length / B);
    if (list.length > maxIds) {
      throw new RangeError(`ids has ${list.length} blocks but tokens (${toks.length}) fill at most ${maxIds} blocks of ${B}`);
    }
    const n = Math.min(Math.floor(toks.length / B), list.length);
    checkInt('existingSharedCount', existingSharedCount, 0, n);
    this.checkHeld(list, 'ids');
    const parent = existingSharedCount > 0 ? list[existingSharedCount - 1]! : 0;
    if (ranges !== null) this.stageRetention(ranges, existingSharedCount, n - existingSharedCount);
    const r = this.insertFrom(toks, list, existingSharedCount, n - existingSharedCount, parent);
    if (r < 0) throwIdError(r, 'ids', list, existingSharedCount, this.numBlocks, this.ex);
    return r;
  }

  /**
   * Caches `ids[i]` under the 16-byte hash `hashes[16i, 16i+16)` (the
   * reference's insert of blocks that already carry a hash, e.g. blocks copied
   * in from another tier). A hash already cached keeps its block; an id already
   * cached is not cached twice. Returns how many became new entries.
   */
  cacheByHashes(ids: ArrayLike<number>, hashes: Uint8Array): number {
    this.live();
    const list = checkInt32Array('ids', ids);
    if (!(hashes instanceof Uint8Array)) throw new TypeError(`hashes must be a Uint8Array, got ${describe(hashes)}`);
    if (hashes.length !== list.length * 16) {
      throw new RangeError(`hashes must hold 16 bytes per id (${list.length * 16}), got ${hashes.length}`);
    }
    this.checkHeld(list, 'ids');
    const arr = list instanceof Int32Array ? list : Int32Array.from(list);
    const r = this.insertHashesFrom(arr, 0, arr.length, hashes, 0);
    if (r < 0) throwIdError(r, 'ids', list, 0, this.numBlocks, this.ex);
    return r;
  }


  /** Every id must be in range and not free (checked without changing anything). */
  private checkHeld(ids: ArrayLike<number>, name: string): void {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id === 0) throw new RangeError(`${name}[${i}] = 0 is the padding block, which is never handed out`);
      if (id < 0 || id >= this.numBlocks) {
        throw new RangeError(`${name}[${i}] = ${id} is out of range: this manager's ids are 1..${this.numBlocks - 1}`);
      }
      if (this.ex.mgr_ref(this.ptr, id) === 0) throw new RangeError(`${name}[${i}] = ${id} has no holder left (it is free)`);
    }
  }
}
