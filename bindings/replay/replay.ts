// `replay()`: the replay kernel on a BlockManagerPool, for programs and the
// CLI. Options carry the CLI's names (`--num-blocks` is `numBlocks`); the
// result echoes the configuration and has one type per mode.

import { loadCore } from '../core/plain-core.js';
import { BlockManagerPool } from '../pool/block-manager-pool.js';
import { HierarchyBlockManagerPool } from '../pool/hierarchy-block-manager-pool.js';
import { ConcurrentBlockManagerImpl } from '../managers/concurrent-block-manager-impl.js';
import { Sequence, adoptBuffer } from '../pool/sequence.js';
import { retentionFrom } from '../managers/retention.js';
import { checkBool, checkInt, checkKeys, checkObject, checkOptionalFunction, describe } from '../validate.js';
import {
  CompositeReplayTarget, compositePoolOptions, parseCompressRatios, type CompositeReplaySequence, type SubManagerReplayStats,
} from './composite-replay.js';
import { type ReplayLinearStateResult, type ReplayProgress, type ReplayResult, type ReplaySequence, type ReplayTarget } from './kernel.js';
import { runReplay } from './stepper.js';
import type { TraceRequest } from './trace.js';
import { generateWorkload } from './workload.js';
import { parseEvictionPolicy, type EvictionPolicy } from '../managers/eviction-policy.js';
import { LinearStateReplayTarget } from './linear-state-target.js';
import { HierarchyReplayTarget, hostTierResult, type HostTierResult } from './hierarchy-replay.js';
import { replayWarnings } from './warnings.js';
import { ReplayKvStore } from './kv-store.js';
import { advanceOutputRun, appendOutputRun, decodeStepsOf } from './output-run.js';
import { stageInPlainCore } from './plain-core-managers.js';

export interface ReplayOptions {
  /**
   * The requests to replay (`parseTrace`, or `readTraceFile` in Node). The
   * Node entry also takes a file name, `-` (stdin) or a built-in trace name
   * such as `'mooncake-conversation'`. Default: the built-in generated workload.
   */
  trace?: readonly TraceRequest[] | string;
  /** Requests of the built-in workload when no trace is given (default 2000). */
  requests?: number;
  /** Replay only the first `limit` requests. */
  limit?: number;
  /** Tokens per KV block (default 16). */
  blockSize?: number;
  /** Physical blocks per dp rank, padding included (default 65536). */
  numBlocks?: number;
  /** Data-parallel ranks, each with `numBlocks` blocks (default 1). */
  dpSize?: number;
  /** Sequences held at once (default 32). */
  maxRunning?: number;
  /** XXH3 seed of the block hash chain, and of the built-in workload (default 1024). */
  seed?: number;
  /** Publish prompt blocks to the prefix cache while the sequence runs (default false). */
  publishAfterPrefill?: boolean;
  /**
   * Eviction policy of the device prefix cache (default 'lru'; not with
   * slidingWindow). 'priority' gives each request's generated tokens
   * priority 10, its prompt the default 35.
   */
  eviction?: EvictionPolicy;
  /**
   * Host-tier blocks per dp rank (0 or absent: none): replay through a
   * HierarchyBlockManagerPool (offload on finish, loads on host hits,
   * transfers complete at once).
   */
  hostBlocks?: number;
  /**
   * With `hostBlocks`: a KV-cache store of this many blocks behind the host
   * tier. Offloaded blocks are written to it; each prefill first prefetches
   * the blocks the host lacks (docs/replay.md, the store tier).
   */
  storeBlocks?: number;
  /** Replay on a composite pool: a sliding window of this many tokens plus full sub-managers. */
  slidingWindow?: number;
  /** With `slidingWindow`: one full sub-manager per ratio (block size B * ratio; default [1]). */
  compressRatios?: readonly number[];
  /**
   * Replay with linear state on: this many checkpoint slots per rank (padding
   * included). Combines with `hostBlocks` and with `slidingWindow`.
   */
  linearStateSlots?: number;
  /** Called as requests are replayed: (done, total). */
  onProgress?: ReplayProgress;
}

/** The configuration a result was produced with: every option, defaults filled in (unset modes are null). */
export interface ReplayConfig {
  /** The trace: its file or built-in name, `workload` (generated) or `requests` (passed as parsed requests). */
  trace: string;
  /** Requests of the built-in workload (null when a trace is given). */
  requests: number | null;
  limit: number | null;
  blockSize: number;
  numBlocks: number;
  dpSize: number;
  maxRunning: number;
  seed: number;
  publishAfterPrefill: boolean;
  eviction: EvictionPolicy;
  hostBlocks: number;
  storeBlocks: number | null;
  slidingWindow: number | null;
  compressRatios: number[] | null;
  linearStateSlots: number | null;
}

/** The pool's own counters for one dp rank at the end of a replay. */
export interface ReplayRankFigures {
  dpRank: number;
  /** Prefix-cache lookups (one per prefill attempt placed on this rank). */
  lookups: number;
  /** Full prompt blocks looked up, and found (an exact-prompt hit's given-back block included). */
  queriedBlocks: number;
  hitBlocks: number;
  evictedBlocks: number;
  allocatedBlocks: number;
  /** The most blocks held by sequences at once. */
  peakUsedBlocks: number;
}

/** What every mode's result has: the kernel's figures, the configuration, per-rank figures, warnings. */
export interface ReplayRunBase extends Omit<ReplayResult, 'linearState'> {
  config: ReplayConfig;
  ranks: ReplayRankFigures[];
  /** Plain-language notes about a result that is probably not what was meant (nothing replayed, everything rejected, ...). */
  warnings: string[];
}
export interface PlainReplayRun extends ReplayRunBase {
  mode: 'plain';
}
export interface LinearStateReplayRun extends ReplayRunBase {
  mode: 'linear-state';
  linearState: ReplayLinearStateResult;
}
export interface CompositeReplayRun extends ReplayRunBase {
  mode: 'composite';
  subManagers: SubManagerReplayStats[];
  /** With `linearStateSlots`. */
  linearState?: ReplayLinearStateResult;
}
export interface HostTierReplayRun extends ReplayRunBase {
  mode: 'host-tier';
  hostTier: HostTierResult;
  /** With `linearStateSlots`. */
  linearState?: ReplayLinearStateResult;
}
/** A replay's result: `mode` tells which parts it has. */
export type ReplayRun = PlainReplayRun | LinearStateReplayRun | CompositeReplayRun | HostTierReplayRun;
export type ReplayMode = ReplayRun['mode'];

/** The keys replay() takes (its options). */
export const REPLAY_OPTION_KEYS: readonly string[] = [
  'trace', 'requests', 'limit', 'blockSize', 'numBlocks', 'dpSize', 'maxRunning', 'seed', 'publishAfterPrefill', 'eviction',
  'hostBlocks', 'storeBlocks', 'slidingWindow', 'compressRatios', 'linearStateSlots', 'onProgress',
];

/** The priority a 'priority' replay gives blocks holding generated tokens only (below the default 35). */
export const REPLAY_DECODE_PRIORITY = 10;

/** The replay loop's view of a BlockManagerPool. */
export class PoolReplayTarget implements ReplayTarget<Sequence> {
  get blockSize(): number {
    return this.pool.blockSize;
  }
  /** @internal The pool reads each prompt from the buffer it was given. */
  readonly holdsPrompt = true;
  /**
   * @internal The pool reads tokens only through its core's stagings; a
   * prompt stays in the core only when that is the core the replay writes
   * prompts in (not the thread-safe managers' shared core).
   */
  get keepsPrompt(): boolean {
    return stageInPlainCore(this.pool.managers);
  }
  /** `decodePriority`: mark every sequence's generated tokens with this priority (the 'priority' policy's replay rule). */
  constructor(readonly pool: BlockManagerPool, readonly decodePriority?: number) {
    if (decodePriority !== undefined) checkInt('decodePriority', decodePriority, 0, 100);
  }
  /** Block tables of finished sequences, reused by new ones (growing a table allocates). */
  private readonly spareTables: Int32Array[] = [];
  newSequence(buffer: Int32Array, promptLength: number, outputsFrom = promptLength): Sequence {
    const s = adoptBuffer(buffer, promptLength, this.spareTables.pop());
    if (this.decodePriority !== undefined) s.state.retention = retentionFrom(outputsFrom, this.decodePriority);
    return s;
  }
  allocate(seq: Sequence, numTokens?: number): boolean {
    return this.pool.allocate(seq, numTokens);
  }
  cache(seq: Sequence): void {
    this.pool.cache(seq);
  }
  deallocate(seq: Sequence): void {
    this.pool.deallocate(seq);
  }
  recycle(seq: Sequence): Int32Array {
    this.spareTables.push(seq.state.table);
    return seq.state.tokens;
  }
  decodeRoom(seq: Sequence): number {
    return this.pool.decodeRoom(seq);
  }
  /** Checks its arguments first (public here): a bad one throws and changes nothing. */
  decodeSteps(seq: Sequence, steps: number): number {
    return decodeStepsOf(this.pool, seq, steps);
  }
  appendOutputs(seq: Sequence, first: number, count: number): void {
    appendOutputRun(seq, first, count);
  }
  /** @internal */
  advanceOutputs(seq: Sequence, count: number): void {
    advanceOutputRun(seq, count);
  }
  blockIds(seq: Sequence): Int32Array {
    return seq.state.table;
  }
  blocksEvicted(): number {
    return this.pool.stats().reduce((a, s) => a + s.blocksEvicted, 0);
  }
  numFreeBlocks(): number {
    return this.pool.numFreeBlocks().reduce((a, b) => a + b, 0);
  }
  numBlocksInPrefixCache(): number {
    return this.pool.numBlocksInPrefixCache().reduce((a, b) => a + b, 0);
  }
}

/** Options checked, defaults filled in (what `replaySync` runs and `config` echoes). */
export interface ParsedReplayOptions {
  blockSize: number;
  numBlocks: number;
  dpSize: number;
  maxRunning: number;
  seed: number;
  limit: number | undefined;
  publishAfterPrefill: boolean;
  requests: number;
  eviction: EvictionPolicy;
  hostBlocks: number;
  storeBlocks: number | undefined;
  slidingWindow: number | undefined;
  compressRatios: number[];
  linearStateSlots: number | undefined;
}

export function parseReplayOptions(o: ReplayOptions): ParsedReplayOptions {
  checkObject('options', o);
  checkKeys('options', o, REPLAY_OPTION_KEYS);
  if (o.compressRatios !== undefined && o.slidingWindow === undefined) {
    throw new TypeError('options.compressRatios needs options.slidingWindow (a composite replay)');
  }
  checkOptionalFunction('options.onProgress', o.onProgress);
  const p: ParsedReplayOptions = {
    blockSize: checkInt('options.blockSize', o.blockSize ?? 16, 1),
    numBlocks: checkInt('options.numBlocks', o.numBlocks ?? 65536, 2),
    dpSize: checkInt('options.dpSize', o.dpSize ?? 1, 1, 4096),
    maxRunning: checkInt('options.maxRunning', o.maxRunning ?? 32, 1),
    seed: checkInt('options.seed', o.seed ?? 1024, 0, Number.MAX_SAFE_INTEGER),
    limit: o.limit === undefined ? undefined : checkInt('options.limit', o.limit, 0),
    publishAfterPrefill: checkBool('options.publishAfterPrefill', o.publishAfterPrefill ?? false),
    requests: checkInt('options.requests', o.requests ?? 2000, 0),
    eviction: o.eviction ?? 'lru',
    hostBlocks: o.hostBlocks === undefined || o.hostBlocks === 0 ? 0 : checkInt('options.hostBlocks', o.hostBlocks, 2),
    storeBlocks: o.storeBlocks === undefined ? undefined : checkInt('options.storeBlocks', o.storeBlocks, 1),
    slidingWindow: o.slidingWindow === undefined ? undefined : checkInt('options.slidingWindow', o.slidingWindow, 1),
    compressRatios: parseCompressRatios('options.compressRatios', o.compressRatios),
    linearStateSlots: o.linearStateSlots === undefined ? undefined : checkInt('options.linearStateSlots', o.linearStateSlots, 2),
  };
  parseEvictionPolicy('options.eviction', p.eviction);
  if (p.slidingWindow !== undefined && p.hostBlocks > 0) {
    throw new TypeError('options.hostBlocks cannot be combined with options.slidingWindow: a host tier keeps prefix-cache blocks, and a composite pool has none');
  }
  if (p.storeBlocks !== undefined && p.hostBlocks === 0) {
    throw new TypeError('options.storeBlocks needs options.hostBlocks: the store sits behind the host tier (it is written by offloads and read into host blocks)');
  }
  if (p.eviction !== 'lru' && p.slidingWindow !== undefined) {
    throw new TypeError(`options.eviction '${p.eviction}' cannot be combined with options.slidingWindow (a composite pool has no prefix cache)`);
  }
  return p;
}

/** The mode `replaySync` will run for these options. */
export function replayMode(p: ParsedReplayOptions): ReplayMode {
  if (p.hostBlocks > 0) return 'host-tier';
  if (p.slidingWindow !== undefined) return 'composite';
  if (p.linearStateSlots !== undefined) return 'linear-state';
  return 'plain';
}

/** The `config` a result echoes. */
export function replayConfig(p: ParsedReplayOptions, trace: string | undefined): ReplayConfig {
  return {
    trace: trace ?? 'workload',
    requests: trace === undefined ? p.requests : null,
    limit: p.limit ?? null,
    blockSize: p.blockSize,
    numBlocks: p.numBlocks,
    dpSize: p.dpSize,
    maxRunning: p.maxRunning,
    seed: p.seed,
    publishAfterPrefill: p.publishAfterPrefill,
    eviction: p.eviction,
    hostBlocks: p.hostBlocks,
    storeBlocks: p.storeBlocks ?? null,
    slidingWindow: p.slidingWindow ?? null,
    compressRatios: p.slidingWindow === undefined ? null : p.compressRatios,
    linearStateSlots: p.linearStateSlots ?? null,
  };
}

/** The parsed requests of `options.trace`, undefined for the built-in workload. */
export function traceArg(options: ReplayOptions): readonly TraceRequest[] | undefined {
  const t = options.trace;
  if (t === undefined) return undefined;
  if (typeof t === 'string') {
    throw new TypeError(`options.trace ${JSON.stringify(t)}: reading a trace by name needs kvpool's Node entry; elsewhere pass parsed requests (parseTrace)`);
  }
  if (!Array.isArray(t)) throw new TypeError(`options.trace must be an array of trace requests, got ${describe(t)}`);
  return t;
}

/**
 * Replays a trace (or the built-in workload) through a fresh pool exactly as
 * the replay kernel describes (docs/replay.md) and returns its result.
 */
export async function replay(options: ReplayOptions = {}): Promise<ReplayRun> {
  const p = parseReplayOptions(options);
  traceArg(options);
  await loadCore();
  // The store's prefetches need a pool whose ranks other threads may share.
  if (p.storeBlocks !== undefined) await ConcurrentBlockManagerImpl.ready();
  return replaySync(options, p);
}

/**
 * `replay` once the core is loaded (always the case in Node). `traceName`
 * is what `config.trace` says (the Node entry passes the file it read).
 */
export function replaySync(options: ReplayOptions = {}, parsed?: ParsedReplayOptions, traceName?: string): ReplayRun {
  const p = parsed ?? parseReplayOptions(options);
  const given = traceArg(options);
  const trace = given ?? generateWorkload({ requests: p.requests, seed: p.seed });
  const config = replayConfig(p, given === undefined ? undefined : (traceName ?? 'requests'));
  const open = openReplay(p);
  try {
    return open.finish(runReplay(open.target, trace, p, options.onProgress), config);
  } finally {
    open.pool.dispose();
  }
}

/** A pool set up for one mode's replay, the loop's view of it, and how its figures become a ReplayRun. */
export interface OpenReplay {
  mode: ReplayMode;
  /** The pool (a HierarchyBlockManagerPool in host-tier mode); the caller disposes it. */
  pool: BlockManagerPool;
  target: ReplayTarget<ReplaySequence>;
  /** The pool's Sequence behind one of the target's sequences. */
  sequenceOf(s: ReplaySequence): Sequence;
  /** The kernel's result, completed with the mode's parts, the configuration, per-rank figures and warnings. */
  finish(r: ReplayResult, config: ReplayConfig): ReplayRun;
}

/**
 * Creates the pool and replay target of the options' mode (what `replaySync`
 * runs; the pool inspector steps the same target).
 */
export function openReplay(p: ParsedReplayOptions): OpenReplay {
  const decodePriority = p.eviction === 'priority' ? REPLAY_DECODE_PRIORITY : undefined;
  const eviction = p.eviction !== 'lru' ? { evictionPolicy: p.eviction } : {};
  const linear = p.linearStateSlots !== undefined;
  const linearOptions = linear ? { enableLinearState: true, linearStateNumSlots: p.linearStateSlots } : {};
  const base = { numBlocks: p.numBlocks, blockSize: p.blockSize, seed: p.seed, dpSize: p.dpSize, ...linearOptions };
  const same = (s: ReplaySequence) => s as Sequence;
  // Linear state wraps whichever target the rank kind and tier give.
  const withLinearState = <S extends ReplaySequence>(t: ReplayTarget<S> & { readonly pool: BlockManagerPool }, seqOf: (s: S) => Sequence) =>
    (linear ? new LinearStateReplayTarget(t, seqOf) : t) as ReplayTarget<ReplaySequence>;
  switch (replayMode(p)) {
    case 'host-tier': {
      const store = p.storeBlocks !== undefined ? new ReplayKvStore(p.storeBlocks) : undefined;
      const pool = new HierarchyBlockManagerPool({ ...base, ...eviction, hostNumBlocks: p.hostBlocks, ...(store && { enableKvcacheStore: true }) });
      return {
        mode: 'host-tier',
        pool,
        target: withLinearState(new HierarchyReplayTarget(pool, decodePriority, store), same),
        sequenceOf: same,
        finish: ({ linearState, ...r }, config) =>
          completeRun<HostTierReplayRun>({ mode: 'host-tier', ...r, hostTier: hostTierResult(pool, p.hostBlocks, r.matchedBlocks, store), ...(linearState && { linearState }) }, config, pool),
      };
    }
    case 'composite': {
      const pool = new BlockManagerPool({ ...compositePoolOptions(p, p.slidingWindow!, p.compressRatios), ...linearOptions });
      const target = new CompositeReplayTarget(pool);
      const seqOf = (s: ReplaySequence) => (s as CompositeReplaySequence).seq;
      return {
        mode: 'composite',
        pool,
        target: withLinearState(target, seqOf),
        sequenceOf: seqOf,
        finish: ({ linearState, ...r }, config) =>
          completeRun<CompositeReplayRun>({ mode: 'composite', ...r, subManagers: target.subManagers(), ...(linearState && { linearState }) }, config, pool),
      };
    }
    default: {
      const pool = new BlockManagerPool({ ...base, ...eviction });
      // The priority replay's rule (docs/replay.md): generated tokens are
      // never part of a later prompt in a trace, so their blocks go first.
      const plain = new PoolReplayTarget(pool, decodePriority);
      if (!linear) {
        return {
          mode: 'plain',
          pool,
          target: plain as ReplayTarget<ReplaySequence>,
          sequenceOf: same,
          finish: (r, config) => completeRun<PlainReplayRun>({ mode: 'plain', ...r }, config, pool),
        };
      }
      return {
        mode: 'linear-state',
        pool,
        target: withLinearState(plain, same),
        sequenceOf: same,
        finish: ({ linearState, ...r }, config) => completeRun<LinearStateReplayRun>({ mode: 'linear-state', ...r, linearState: linearState! }, config, pool),
      };
    }
  }
}

/** A mode's figures with the configuration, the pool's per-rank figures and the warnings added (key order: mode, config, figures). */
export function completeRun<R extends ReplayRun>(run: Omit<R, 'ranks' | 'warnings' | 'config'>, config: ReplayConfig, pool: BlockManagerPool): R {
  const full = Object.assign({ mode: run.mode, config }, run, { ranks: rankFigures(pool), warnings: [] as string[] }) as unknown as R;
  full.warnings = replayWarnings(full);
  return full;
}

function rankFigures(pool: BlockManagerPool): ReplayRankFigures[] {
  return pool.stats().map((s, dpRank) => ({
    dpRank,
    lookups: s.matchCalls,
    queriedBlocks: s.blocksQueried,
    hitBlocks: s.blocksHit,
    evictedBlocks: s.blocksEvicted,
    allocatedBlocks: s.blocksAllocated,
    peakUsedBlocks: s.peakUsedBlocks,
  }));
}
