// ConcurrentBlockManagerImpl (docs/threads.md): BlockManagerImpl for managers
// that several threads use at once (disaggregated prefill/decode, a KV-cache
// store). The manager lives in the shared-memory build of the core, so the
// main thread and its workers see one state; every operation runs under a
// re-entrant lock kept in that memory beside the manager.

import { lockEveryMethod } from './lock-every-method.js';
import { MAGIC_MANAGER } from '../core/abi.js';
import type { CoreInstance, WasmSource } from '../core/core-instance.js';
import {
  attachSharedCore, loadSharedCore, releaseSharedThread, sharedCore, sharedCoreInfo, trackSharedManager,
} from '../core/shared-core.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';
import type { BlockManager, BlockManagerStats } from './block-manager.js';
import { BlockManagerImpl, MANAGER_OPTION_KEYS, parseManagerOptions, type BlockManagerOptions, type ManagerPlacement } from './block-manager-impl.js';
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

function splitOptions(options: ConcurrentBlockManagerOptions, minBlocks = 2): { base: BlockManagerOptions; lockTimeoutMs: number } {
  checkObject('options', options);
  checkKeys('options', options, [...MANAGER_OPTION_KEYS, 'lockTimeoutMs']);
  const { lockTimeoutMs, ...base } = options;
  const ms = lockTimeoutMs === undefined ? DEFAULT_LOCK_TIMEOUT_MS : checkInt('options.lockTimeoutMs', lockTimeoutMs, 1);
  parseManagerOptions(base, 'options', minBlocks);
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
  constructor(options: ConcurrentBlockManagerOptions, /** @internal */ placement?: Pick<ManagerPlacement, 'minBlocks'>) {
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
      : splitOptions(options, placement?.minBlocks);
    super(base, { minBlocks: at || placement?.minBlocks === 1 ? 1 : 2 });
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

  /** @internal Takes the lock (one more level when this thread holds it); throws when the manager is gone or the wait times out. */
  lockEnter(): void {
    this.live();
    this.lock.enter();
  }

  /** @internal Gives one level of the lock back. */
  lockExit(): void {
    this.lock.exit();
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

  // ---- the calls that are more than "take the lock, call BlockManagerImpl" ----

  /**
   * Pops `n` ids. Short of free ids, it first evicts through `evict()` — the
   * eviction path takes the lock again on this thread (as the reference's
   * evicted entries return through the free path while the allocation holds
   * its recursive mutex).
   */
  override allocate(n: number): Int32Array | null {
    this.live();
    checkInt('n', n);
    return this.withLock(() => {
      this.makeRoom(n);
      return super.allocate(n);
    });
  }

  /** @internal */
  override allocateInto(n: number, dst: Int32Array, at: number): boolean {
    return this.withLock(() => {
      this.makeRoom(n);
      return super.allocateInto(n, dst, at);
    });
  }

  /** @internal Not in one call: its evictions go through its lock (makeRoom), one allocation at a time. */
  override allocateStepsInto(): number {
    return -1;
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

  override get isDisposed(): boolean {
    return this.released;
  }

  override live(): void {
    if (this.released) throw new Error('kvpool: this ConcurrentBlockManagerImpl was disposed; it cannot be used any more');
  }

  // The core's allocate would evict by itself; doing it through evict()
  // first keeps the reference's shape (and the same ids and counters).
  private makeRoom(n: number): void {
    if (!this.enablePrefixCache) return;
    const free = this.ex.mgr_num_free(this.ptr);
    if (n > free) this.evict(n - free);
  }
}

// Every other method and accessor of BlockManagerImpl (and CoreManager) runs
// under the lock, by construction: a method added there later is covered
// here without a line of its own. The exceptions hold no state to protect or
// take the lock themselves.
const UNLOCKED = new Set(['constructor', 'live', 'sameCore', 'coreRuntime', 'createRegion', 'share', 'withLock', 'lockEnter', 'lockExit', 'lockDepth', 'isDisposed', 'makeRoom']);
lockEveryMethod(ConcurrentBlockManagerImpl.prototype, UNLOCKED);
