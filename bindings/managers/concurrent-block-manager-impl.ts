// ConcurrentBlockManagerImpl (seed section 9.1): BlockManagerImpl for managers
// that several threads use at once (disaggregated prefill/decode, a KV-cache
// store). The manager lives in the shared-memory build of the core, so the
// main thread and its workers see one state; every operation runs under a
// re-entrant lock kept in that memory beside the manager.

import { MAGIC_MANAGER } from '../core/abi.js';
import type { CoreInstance, WasmSource } from '../core/core-instance.js';
import {
  attachSharedCore, loadSharedCore, releaseSharedThread, sharedCore, sharedCoreInfo, trackSharedManager,
} from '../core/shared-core.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';
import type { BlockManager, BlockManagerStats } from './block-manager.js';
import { BlockManagerImpl, parseManagerOptions, type BlockManagerOptions } from './block-manager-impl.js';
import type { Retention, RetentionRange } from './retention.js';
import type { CoreManagerConfig } from './core-manager.js';
import { SharedLock } from './shared-lock.js';
import type { KVEvent } from './kv-events.js';

export interface ConcurrentBlockManagerOptions extends BlockManagerOptions {
  /**
   * Longest wait for the lock before giving up with a LockTimeoutError, in
   * milliseconds (default 10000): how a thread that died holding the lock is
   * detected.
   */
  lockTimeoutMs?: number;
}

/**
 * What `share()` returns: structured-clonable (postMessage it to a worker),
 * turned back into a manager by `ConcurrentBlockManagerImpl.attach`. It names
 * the manager and nothing else: `attach` checks that the header is a live
 * manager of that generation and reads the manager's shape (blocks, block
 * size, seed) and lock from the shared memory itself, never from here.
 */
export interface SharedManagerDescriptor {
  readonly kind: 'kvpool.ConcurrentBlockManagerImpl';
  /** The shared linear memory every thread's core instance runs over. */
  readonly memory: WebAssembly.Memory;
  /** The compiled shared-memory core. */
  readonly module: WebAssembly.Module;
  /** Byte offset of the manager's header in `memory`. */
  readonly ptr: number;
  /** The header's generation: a descriptor of a disposed manager is refused, even once its header is reused. */
  readonly gen: number;
  /** Longest wait for the lock in the attaching thread, in milliseconds. */
  readonly lockTimeoutMs: number;
}

/** The manager a validated descriptor names, read from the shared memory. */
interface Attaching {
  readonly desc: SharedManagerDescriptor;
  readonly rt: CoreInstance;
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly enablePrefixCache: boolean;
  readonly seedLo: number;
  readonly seedHi: number;
}

const DEFAULT_LOCK_TIMEOUT_MS = 10_000;

const STALE =
  'descriptor does not name a live manager of this shared memory: the manager was disposed, ' +
  'or the descriptor did not come from share() unchanged';

// Set by attach() for the constructor it calls (synchronously) next.
let attaching: Attaching | null = null;

function splitOptions(options: ConcurrentBlockManagerOptions): { base: BlockManagerOptions; lockTimeoutMs: number } {
  checkObject('options', options);
  const { lockTimeoutMs, ...base } = options;
  const ms = lockTimeoutMs === undefined ? DEFAULT_LOCK_TIMEOUT_MS : checkInt('options.lockTimeoutMs', lockTimeoutMs, 1);
  parseManagerOptions(base);
  return { base, lockTimeoutMs: ms };
}

export class ConcurrentBlockManagerImpl extends BlockManagerImpl implements BlockManager {
  /** This thread's id in the shared core (1, 2, ...): what the lock records as its owner. */
  readonly threadId: number;
  /** Longest wait for the lock, in milliseconds. */
  readonly lockTimeoutMs: number;
  private readonly lock: SharedLock;
  /** False for managers attached from a descriptor: they do not free the manager. */
  private readonly creator: boolean;
  private released = false;

  /** Synchronous once the shared core is loaded (always in Node); see `create` otherwise. */
  constructor(options: ConcurrentBlockManagerOptions) {
    const at = attaching; // cleared by attach() once construction is over
    const { base, lockTimeoutMs } = at
      ? {
          base: {
            numBlocks: at.numBlocks,
            blockSize: at.blockSize,
            enablePrefixCache: at.enablePrefixCache,
            seed: (BigInt(at.seedHi) << 32n) | BigInt(at.seedLo),
          },
          lockTimeoutMs: at.desc.lockTimeoutMs,
        }
      : splitOptions(options);
    super(base);
    if (at && this.gen !== at.desc.gen) throw new RangeError(STALE);
    this.lockTimeoutMs = lockTimeoutMs;
    this.creator = at === null;
    this.threadId = sharedCoreInfo().threadId;
    const mem = this.mem;
    this.lock = new SharedLock(() => mem.i32, this.ptr, this.gen, this.threadId, lockTimeoutMs);
    trackSharedManager(1);
  }

  /** Loads the shared-memory core if needed (browsers: pass its URL or bytes), then creates the manager. */
  static override async create(options: ConcurrentBlockManagerOptions, source?: WasmSource): Promise<ConcurrentBlockManagerImpl> {
    splitOptions(options);
    await loadSharedCore(source);
    return new ConcurrentBlockManagerImpl(options);
  }

  /** Resolves once the shared-memory core is loaded in this thread (browsers: pass its URL or bytes). */
  static override ready(source?: WasmSource): Promise<void> {
    return loadSharedCore(source);
  }

  /**
   * A manager over the state `descriptor` (from `share()`, possibly in
   * another thread) describes. The first attach in a thread instantiates the
   * shared core there over the descriptor's memory.
   */
  static attach(descriptor: SharedManagerDescriptor): ConcurrentBlockManagerImpl {
    checkObject('descriptor', descriptor);
    if (descriptor.kind !== 'kvpool.ConcurrentBlockManagerImpl') {
      throw new TypeError(`descriptor must come from ConcurrentBlockManagerImpl.share(), got kind ${describe(descriptor.kind)}`);
    }
    if (!(descriptor.memory instanceof WebAssembly.Memory)) {
      throw new TypeError(`descriptor.memory must be a WebAssembly.Memory, got ${describe(descriptor.memory)}`);
    }
    if (!(descriptor.module instanceof WebAssembly.Module)) {
      throw new TypeError(`descriptor.module must be a WebAssembly.Module, got ${describe(descriptor.module)}`);
    }
    checkKeys('descriptor', descriptor, ['kind', 'memory', 'module', 'ptr', 'gen', 'lockTimeoutMs']);
    checkInt('descriptor.ptr', descriptor.ptr, 0, 0xffffffff);
    checkInt('descriptor.gen', descriptor.gen, 1, 0xffffffff);
    checkInt('descriptor.lockTimeoutMs', descriptor.lockTimeoutMs, 1);
    const rt = attachSharedCore(descriptor.memory, descriptor.module);
    // Only a header slot of this memory holding a live manager of that
    // generation passes: anything else (a disposed manager, another
    // object, an address that is no header) is refused before it is read.
    if (rt.ex.obj_valid(descriptor.ptr, descriptor.gen, MAGIC_MANAGER) !== 1) throw new RangeError(STALE);
    const info = rt.staging.byteSpace(20);
    rt.ex.mgr_info(descriptor.ptr, info);
    const w = info >>> 2;
    const i32 = rt.i32;
    attaching = {
      desc: descriptor,
      rt,
      numBlocks: i32[w]!,
      blockSize: i32[w + 1]!,
      enablePrefixCache: i32[w + 2] !== 0,
      seedLo: i32[w + 3]! >>> 0,
      seedHi: i32[w + 4]! >>> 0,
    };
    try {
      return new ConcurrentBlockManagerImpl({ numBlocks: attaching.numBlocks, blockSize: attaching.blockSize });
    } finally {
      attaching = null;
    }
  }

  /**
   * Gives this thread's own regions of the shared memory back (staging
   * areas, hashing scratch): for a worker that is done while the memory
   * lives on. Every manager of this thread must be disposed first.
   */
  static releaseThread(): void {
    releaseSharedThread();
  }

  /** A structured-clonable descriptor of this manager for `attach` in another thread. */
  share(): SharedManagerDescriptor {
    this.live();
    const { memory, module } = sharedCoreInfo();
    return {
      kind: 'kvpool.ConcurrentBlockManagerImpl',
      memory,
      module,
      ptr: this.ptr,
      gen: this.gen,
      lockTimeoutMs: this.lockTimeoutMs,
    };
  }

  /**
   * Runs `fn` holding the manager's lock, so a sequence of calls (each of
   * which takes the lock again, re-entrantly) is atomic for other threads.
   */
  withLock<T>(fn: () => T): T {
    this.live();
    this.lock.enter();
    try {
      return fn();
    } finally {
      this.lock.exit();
    }
  }

  /** Lock levels this thread holds right now (0: not holding it). */
  lockDepth(): number {
    this.live();
    return this.lock.depth();
  }

  // ---- hooks ----

  protected override coreRuntime(): CoreInstance {
    return attaching ? attaching.rt : sharedCore();
  }

  protected override createRegion(cfg: CoreManagerConfig): number {
    return attaching ? attaching.desc.ptr : super.createRegion(cfg);
  }

  // ---- every operation under the lock ----

  /**
   * Pops `n` ids. Short of free ids, it first evicts through `evict()` — the
   * eviction path takes the lock again on this thread (seed 9.1: evicted
   * entries return through the free path while the allocation holds the lock).
   */
  override allocate(n: number): Int32Array | null {
    this.live();
    checkInt('n', n);
    this.lock.enter();
    try {
      this.makeRoom(n);
      return super.allocate(n);
    } finally {
      this.lock.exit();
    }
  }

  override deallocate(ids: ArrayLike<number>): void {
    this.lock.enter();
    try {
      super.deallocate(ids);
    } finally {
      this.lock.exit();
    }
  }

  override retain(ids: ArrayLike<number>): void {
    this.lock.enter();
    try {
      super.retain(ids);
    } finally {
      this.lock.exit();
    }
  }

  override allocateShared(tokens: ArrayLike<number>, existingShared: ArrayLike<number> = []): Int32Array {
    this.lock.enter();
    try {
      return super.allocateShared(tokens, existingShared);
    } finally {
      this.lock.exit();
    }
  }

  override cache(tokens: ArrayLike<number>, ids: ArrayLike<number>, existingSharedCount = 0, retention?: readonly RetentionRange[]): number {
    this.lock.enter();
    try {
      return super.cache(tokens, ids, existingSharedCount, retention);
    } finally {
      this.lock.exit();
    }
  }

  override evict(n: number): number {
    this.lock.enter();
    try {
      return super.evict(n);
    } finally {
      this.lock.exit();
    }
  }

  override numFreeBlocks(): number {
    this.lock.enter();
    try {
      return super.numFreeBlocks();
    } finally {
      this.lock.exit();
    }
  }

  override numUsedBlocks(): number {
    this.lock.enter();
    try {
      return super.numUsedBlocks();
    } finally {
      this.lock.exit();
    }
  }

  override numBlocksInPrefixCache(): number {
    this.lock.enter();
    try {
      return super.numBlocksInPrefixCache();
    } finally {
      this.lock.exit();
    }
  }

  override stats(): BlockManagerStats {
    return this.locked(() => super.stats());
  }

  override check(): void {
    this.locked(() => super.check());
  }

  override refCount(id: number): number {
    return this.locked(() => super.refCount(id));
  }

  override holderCounts(): Int32Array {
    return this.locked(() => super.holderCounts());
  }

  override freeIds(): Int32Array {
    return this.locked(() => super.freeIds());
  }

  override lruOrder(): Int32Array {
    return this.locked(() => super.lruOrder());
  }

  /**
   * The creating manager gives the manager's memory back (every other thread
   * must be done with it); an attached one only stops being usable.
   */
  override dispose(): void {
    if (this.released) return;
    this.released = true;
    trackSharedManager(-1);
    if (!this.creator) return;
    // Another thread may be inside a call: destroy once it is out.
    this.lock.enter();
    try {
      super.dispose();
    } finally {
      this.lock.exit();
    }
  }

  // ---- the pool's hot paths ----

  /** @internal */
  override allocateInto(n: number, dst: Int32Array, at: number): boolean {
    this.lock.enter();
    try {
      this.makeRoom(n);
      return super.allocateInto(n, dst, at);
    } finally {
      this.lock.exit();
    }
  }

  /** @internal */
  override releaseFrom(ids: Int32Array, start: number, end: number): number {
    this.lock.enter();
    try {
      return super.releaseFrom(ids, start, end);
    } finally {
      this.lock.exit();
    }
  }

  /** @internal */
  override retainFrom(ids: Int32Array, start: number, end: number): number {
    this.lock.enter();
    try {
      return super.retainFrom(ids, start, end);
    } finally {
      this.lock.exit();
    }
  }

  /** @internal */
  override matchInto(
    tokens: ArrayLike<number>, first: number, nBlocks: number, parentId: number, dst: Int32Array, at: number,
    salt: Uint8Array | null = null,
  ): number {
    this.lock.enter();
    try {
      return super.matchInto(tokens, first, nBlocks, parentId, dst, at, salt);
    } finally {
      this.lock.exit();
    }
  }

  /** @internal */
  override insertFrom(
    tokens: ArrayLike<number>, ids: ArrayLike<number>, first: number, nBlocks: number, parentId: number,
    salt: Uint8Array | null = null, known = 0,
  ): number {
    this.lock.enter();
    try {
      return super.insertFrom(tokens, ids, first, nBlocks, parentId, salt, known);
    } finally {
      this.lock.exit();
    }
  }

  // Calls added with the host tier, the views, KV-cache events and eviction policies: the same lock.

  override setTime(t: number): void {
    this.locked(() => super.setTime(t));
  }

  /** @internal */
  override insertWithRetention(
    ranges: readonly Retention[], tokens: ArrayLike<number>, ids: ArrayLike<number>, first: number, nBlocks: number, parentId: number,
    salt: Uint8Array | null,
  ): number {
    return this.locked(() => super.insertWithRetention(ranges, tokens, ids, first, nBlocks, parentId, salt));
  }

  override resetPrefixCache(): number {
    return this.locked(() => super.resetPrefixCache());
  }

  override recordEvents(on: boolean): void {
    this.locked(() => super.recordEvents(on));
  }

  override drainEvents(dpRank = 0, out: KVEvent[] = []): KVEvent[] {
    return this.locked(() => super.drainEvents(dpRank, out));
  }

  override blockHash(id: number): Uint8Array | null {
    return this.locked(() => super.blockHash(id));
  }

  override blockStates(out?: Uint8Array): Uint8Array {
    return this.locked(() => super.blockStates(out));
  }

  override cacheByHashes(ids: ArrayLike<number>, hashes: Uint8Array): number {
    return this.locked(() => super.cacheByHashes(ids, hashes));
  }

  /** @internal */
  override insertHashesFrom(ids: Int32Array, start: number, end: number, hashes: Uint8Array, hashAt: number): number {
    return this.locked(() => super.insertHashesFrom(ids, start, end, hashes, hashAt));
  }

  /** @internal */
  override peekMatches(tokens: ArrayLike<number>, nBlocks: number): number {
    return this.locked(() => super.peekMatches(tokens, nBlocks));
  }

  /** @internal */
  override blockHashInto(id: number, out: Uint8Array, at: number): boolean {
    return this.locked(() => super.blockHashInto(id, out, at));
  }

  /** @internal */
  override isCachedId(id: number): boolean {
    return this.locked(() => super.isCachedId(id));
  }

  override get isDisposed(): boolean {
    return this.released;
  }

  override live(): void {
    if (this.released) throw new Error('kvpool: this ConcurrentBlockManagerImpl was disposed; it cannot be used any more');
  }

  private locked<T>(fn: () => T): T {
    this.lock.enter();
    try {
      return fn();
    } finally {
      this.lock.exit();
    }
  }

  // The core's allocate would evict by itself; doing it through evict()
  // first keeps the reference's shape (and the same ids and counters).
  private makeRoom(n: number): void {
    if (!this.enablePrefixCache) return;
    const free = this.ex.mgr_num_free(this.ptr);
    if (n > free) this.evict(n - free);
  }
}
