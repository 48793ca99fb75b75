// ConcurrentXTensorBlockManagerImpl: an XTensor manager that several threads
// use at once (disaggregated prefill/decode, a KV-cache store; see
// docs/xtensor.md). Its whole state is one SharedArrayBuffer
// (xtensor-state.ts) with a re-entrant lock in its header, and every thread's
// handle runs the same XTensorBlockManagerImpl code over it, every call under
// the lock. A thread's lock identity is its id in the shared-memory core, so
// this manager and the core-backed concurrent managers agree on who is who.

import { lockEveryMethod } from './lock-every-method.js';
import type { WasmSource } from '../core/core-instance.js';
import { attachSharedCore, loadSharedCore, releaseSharedThread, sharedCoreInfo, trackSharedManager } from '../core/shared-core.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';
import { LockTimeoutError, SharedLock } from './shared-lock.js';
import { XTensorBlockManagerImpl, parseXTensorOptions, type XTensorBlockManagerOptions } from './xtensor-block-manager-impl.js';
import { HEADER_BYTES, W_GEN, W_LAYOUT, W_MAGIC, XTensorState, XT_LAYOUT, XT_MAGIC, stateBytes } from './xtensor-state.js';

export interface ConcurrentXTensorBlockManagerOptions extends XTensorBlockManagerOptions {
  /**
   * Longest wait for the lock before giving up with a LockTimeoutError, in
   * milliseconds (default 10000): how a thread that died holding the lock is
   * detected.
   */
  lockTimeoutMs?: number;
}

/**
 * What `share()` returns: structured-clonable (postMessage it to a worker),
 * turned back into a manager by `ConcurrentXTensorBlockManagerImpl.attach`.
 * It names the manager and nothing else: `attach` checks that the buffer
 * holds a live XTensor state of that generation and reads the shape from the
 * buffer itself, never from here.
 */
export interface SharedXTensorDescriptor {
  readonly kind: 'kvpool.ConcurrentXTensorBlockManagerImpl';
  /** The manager's whole state. */
  readonly buffer: SharedArrayBuffer;
  /** The state's generation: a descriptor of a disposed manager is refused. */
  readonly gen: number;
  /** The shared-memory core every thread takes its lock identity from (its memory and compiled module). */
  readonly memory: WebAssembly.Memory;
  readonly module: WebAssembly.Module;
  /** Longest wait for the lock in the attaching thread, in milliseconds. */
  readonly lockTimeoutMs: number;
}

const DEFAULT_LOCK_TIMEOUT_MS = 10_000;

const STALE =
  'descriptor does not name a live XTensor manager: the manager was disposed, ' +
  'or the descriptor did not come from share() unchanged';

// Set by attach() for the constructor it calls (synchronously) next.
let attaching: { buffer: SharedArrayBuffer; gen: number; lockTimeoutMs: number } | null = null;

function randomGen(): number {
  const g = crypto.getRandomValues(new Uint32Array(1))[0]!;
  return g === 0 ? 1 : g;
}

function splitOptions(options: ConcurrentXTensorBlockManagerOptions): { base: XTensorBlockManagerOptions; lockTimeoutMs: number } {
  checkObject('options', options);
  const { lockTimeoutMs, ...base } = options;
  const ms = lockTimeoutMs === undefined ? DEFAULT_LOCK_TIMEOUT_MS : checkInt('options.lockTimeoutMs', lockTimeoutMs, 1);
  parseXTensorOptions(base);
  return { base, lockTimeoutMs: ms };
}

/**
 * The options a shared state was made with, read from its header; throws
 * STALE unless `buffer` holds a live state of generation `gen` whose shape
 * is valid and matches the buffer's size.
 */
function readOptions(buffer: SharedArrayBuffer, gen: number): XTensorBlockManagerOptions {
  if (buffer.byteLength < HEADER_BYTES) throw new RangeError(STALE);
  const i32 = new Int32Array(buffer, 0, HEADER_BYTES / 4);
  if (Atomics.load(i32, W_MAGIC) !== XT_MAGIC || Atomics.load(i32, W_GEN) >>> 0 !== gen || i32[W_LAYOUT] !== XT_LAYOUT) throw new RangeError(STALE);
  const options = XTensorState.rawShape(i32, new Float64Array(buffer, 0, HEADER_BYTES / 8));
  let bytes: number;
  try {
    bytes = stateBytes(parseXTensorOptions(options, 'state'));
  } catch {
    throw new RangeError(STALE);
  }
  if (bytes !== buffer.byteLength) throw new RangeError(STALE);
  return options;
}

export class ConcurrentXTensorBlockManagerImpl extends XTensorBlockManagerImpl {
  /** This thread's id in the shared core (1, 2, ...): what the lock records as its owner. */
  readonly threadId: number;
  /** Longest wait for the lock, in milliseconds. */
  readonly lockTimeoutMs: number;
  private readonly gen: number;
  private readonly lock: SharedLock;
  /** False for managers attached from a descriptor: disposing them only ends this handle. */
  private readonly creator: boolean;
  private released = false;

  /** Synchronous once the shared core is loaded (always in Node); see `create` otherwise. */
  constructor(options: ConcurrentXTensorBlockManagerOptions) {
    const at = attaching; // cleared by attach() once construction is over
    const { base, lockTimeoutMs } = at ? { base: options, lockTimeoutMs: at.lockTimeoutMs } : splitOptions(options);
    // The creating thread's lock identity (and the shared core it comes from) exists before the state.
    const threadId = sharedCoreInfo().threadId;
    super(base, at ? { attach: at.buffer } : { alloc: (bytes) => new SharedArrayBuffer(bytes) });
    this.threadId = threadId;
    this.lockTimeoutMs = lockTimeoutMs;
    this.creator = at === null;
    const i32 = this.st.i32;
    if (at) {
      this.gen = at.gen;
    } else {
      this.gen = randomGen();
      Atomics.store(i32, W_GEN, this.gen);
    }
    this.lock = new SharedLock(() => i32, 0, this.gen, threadId, lockTimeoutMs);
    trackSharedManager(1);
  }

  /** Loads the shared-memory core if needed (browsers: pass its URL or bytes), then creates the manager. */
  static override async create(options: ConcurrentXTensorBlockManagerOptions, source?: WasmSource): Promise<ConcurrentXTensorBlockManagerImpl> {
    splitOptions(options);
    await loadSharedCore(source);
    return new ConcurrentXTensorBlockManagerImpl(options);
  }

  /** Resolves once the shared-memory core is loaded in this thread (browsers: pass its URL or bytes). */
  static ready(source?: WasmSource): Promise<void> {
    return loadSharedCore(source);
  }

  /**
   * A manager over the state `descriptor` (from `share()`, possibly in
   * another thread) names. The first attach in a thread that runs no shared
   * core yet instantiates it there over the descriptor's memory.
   */
  static attach(descriptor: SharedXTensorDescriptor): ConcurrentXTensorBlockManagerImpl {
    checkObject('descriptor', descriptor);
    if (descriptor.kind !== 'kvpool.ConcurrentXTensorBlockManagerImpl') {
      throw new TypeError(`descriptor must come from ConcurrentXTensorBlockManagerImpl.share(), got kind ${describe(descriptor.kind)}`);
    }
    checkKeys('descriptor', descriptor, ['kind', 'buffer', 'gen', 'memory', 'module', 'lockTimeoutMs']);
    if (!(descriptor.buffer instanceof SharedArrayBuffer)) {
      throw new TypeError(`descriptor.buffer must be a SharedArrayBuffer, got ${describe(descriptor.buffer)}`);
    }
    if (!(descriptor.memory instanceof WebAssembly.Memory)) {
      throw new TypeError(`descriptor.memory must be a WebAssembly.Memory, got ${describe(descriptor.memory)}`);
    }
    if (!(descriptor.module instanceof WebAssembly.Module)) {
      throw new TypeError(`descriptor.module must be a WebAssembly.Module, got ${describe(descriptor.module)}`);
    }
    checkInt('descriptor.gen', descriptor.gen, 1, 0xffffffff);
    checkInt('descriptor.lockTimeoutMs', descriptor.lockTimeoutMs, 1);
    const options = readOptions(descriptor.buffer, descriptor.gen);
    attachSharedCore(descriptor.memory, descriptor.module);
    attaching = { buffer: descriptor.buffer, gen: descriptor.gen, lockTimeoutMs: descriptor.lockTimeoutMs };
    try {
      return new ConcurrentXTensorBlockManagerImpl(options);
    } finally {
      attaching = null;
    }
  }

  /**
   * Gives this thread's regions of the shared core back: for a worker that is
   * done while other threads live on. Every shared manager of this thread
   * (of either kind) must be disposed first.
   */
  static releaseThread(): void {
    releaseSharedThread();
  }

  /** A structured-clonable descriptor of this manager for `attach` in another thread. */
  share(): SharedXTensorDescriptor {
    this.live();
    const { memory, module } = sharedCoreInfo();
    return {
      kind: 'kvpool.ConcurrentXTensorBlockManagerImpl',
      buffer: this.st.buffer as SharedArrayBuffer,
      gen: this.gen,
      memory,
      module,
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

  /**
   * The creating handle ends the manager for every thread: each handle's
   * next call throws (a call under way in another thread finishes first, as
   * it holds the lock). An attached handle only stops being usable.
   */
  override dispose(): void {
    if (this.released) return;
    this.released = true;
    trackSharedManager(-1);
    if (!this.creator) return;
    // No memory is given back (the buffer goes when the last thread drops
    // it), so a thread that died holding the lock does not stop the end.
    let held = false;
    try {
      this.lock.enter();
      held = true;
    } catch (e) {
      if (!(e instanceof LockTimeoutError)) throw e;
    }
    Atomics.store(this.st.i32, W_GEN, 0);
    Atomics.store(this.st.i32, W_MAGIC, 0);
    if (held) this.lock.exit();
  }

  override get isDisposed(): boolean {
    return this.released;
  }

  override live(): void {
    if (this.released) throw new Error('kvpool: this ConcurrentXTensorBlockManagerImpl was disposed; it cannot be used any more');
  }
}

// Every method and accessor of XTensorBlockManagerImpl runs under the lock,
// by construction: one added there later is covered here without a line of
// its own. The exceptions hold no state to protect, take the lock
// themselves, or are private helpers reached only from a locked method.
const UNLOCKED = new Set([
  'constructor', 'live', 'isDisposed', 'dispose', 'share', 'withLock', 'lockEnter', 'lockExit', 'lockDepth',
  // private helpers of XTensorBlockManagerImpl (called with the lock held)
  'ready', 'usedBlocks', 'pageQueueAt', 'canTake', 'lowestAvail', 'setAvail', 'take', 'freeId', 'drop', 'checkHeldId', 'checkRelease',
  'releaseError',
]);
lockEveryMethod(ConcurrentXTensorBlockManagerImpl.prototype, UNLOCKED);
