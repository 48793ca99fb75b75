// `replay()`: the replay kernel on a BlockManagerPool, for programs and the CLI.

import { loadCore } from '../core/plain-core.js';
import { BlockManagerPool } from '../pool/block-manager-pool.js';
import { Sequence } from '../pool/sequence.js';
import { checkBool, checkInt, checkKeys, checkObject } from '../validate.js';
import { CompositeReplayTarget, compositePoolOptions, parseCompressRatios, type CompositeReplayResult } from './composite-replay.js';
import { runReplay, type ReplayProgress, type ReplayResult, type ReplayTarget } from './kernel.js';
import type { TraceRequest } from './trace.js';
import { generateWorkload } from './workload.js';
import { parseEvictionPolicy, type EvictionPolicy } from '../managers/eviction-policy.js';
import { LinearStateReplayTarget } from './linear-state-target.js';
import { replayWithHostTier, type HierarchyReplayResult } from './hierarchy-replay.js';

export interface ReplayOptions {
  /** Requests to replay (default: the built-in generated workload). */
  trace?: readonly TraceRequest[];
  blockSize?: number;
  numBlocks?: number;
  maxRunning?: number;
  seed?: number;
  limit?: number;
  publishAfterPrefill?: boolean;
  /**
   * Host-tier blocks per dp rank: replay through a HierarchyBlockManagerPool
   * (offload on finish, loads on host hits, transfers complete at once); the
   * result then has a `hostTier` part.
   */
  hostBlocks?: number;
  /** Requests of the built-in workload when no trace is given (default 2000). */
  workloadRequests?: number;
  /** Replay with linear state on: this many checkpoint slots per rank (padding included). */
  linearStateSlots?: number;
  onProgress?: ReplayProgress;
  /** Replay on a composite pool: a sliding window of this many tokens plus full sub-managers. */
  slidingWindow?: number;
  /** With `slidingWindow`: one full sub-manager per ratio (block size B * ratio; default [1]). */
  compressRatios?: number[];
  /**
   * The pool's eviction policy (default 'lru'; not with slidingWindow or
   * hostBlocks). 'priority' marks each request's generated tokens with
   * priority 10 (prompt blocks keep 35).
   */
  evictionPolicy?: EvictionPolicy;
}

const KEYS = [
  'trace', 'blockSize', 'numBlocks', 'maxRunning', 'seed', 'limit', 'publishAfterPrefill', 'workloadRequests', 'onProgress',
  'slidingWindow', 'compressRatios', 'linearStateSlots', 'hostBlocks', 'evictionPolicy',
];

/** The priority a 'priority' replay gives blocks holding generated tokens only (below the default 35). */
export const REPLAY_DECODE_PRIORITY = 10;

/** The replay loop's view of a BlockManagerPool. */
export class PoolReplayTarget implements ReplayTarget<Sequence> {
  /** `decodePriority`: mark every sequence's generated tokens with this priority (the 'priority' policy's replay rule). */
  constructor(readonly pool: BlockManagerPool, readonly decodePriority?: number) {}
  /** Block tables of finished sequences, reused by new ones (growing a table allocates). */
  private readonly spareTables: Int32Array[] = [];
  newSequence(buffer: Int32Array, promptLength: number): Sequence {
    const s = Sequence.fromBuffer(buffer, promptLength);
    const table = this.spareTables.pop();
    if (table !== undefined) s.state.table = table;
    if (this.decodePriority !== undefined) s.setRetention([{ start: promptLength, priority: this.decodePriority }]);
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

export function parseReplayOptions(o: ReplayOptions) {
  checkObject('options', o);
  checkKeys('options', o, KEYS);
  if (o.compressRatios !== undefined && o.slidingWindow === undefined) {
    throw new TypeError('options.compressRatios needs options.slidingWindow (a composite replay), got slidingWindow undefined');
  }
  return {
    blockSize: checkInt('options.blockSize', o.blockSize ?? 16, 1),
    numBlocks: checkInt('options.numBlocks', o.numBlocks ?? 65536, 2),
    maxRunning: checkInt('options.maxRunning', o.maxRunning ?? 32, 1),
    seed: checkInt('options.seed', o.seed ?? 1024, 0, Number.MAX_SAFE_INTEGER),
    limit: o.limit === undefined ? undefined : checkInt('options.limit', o.limit, 0),
    publishAfterPrefill: checkBool('options.publishAfterPrefill', o.publishAfterPrefill ?? false),
    workloadRequests: checkInt('options.workloadRequests', o.workloadRequests ?? 2000, 0),
    slidingWindow: o.slidingWindow === undefined ? undefined : checkInt('options.slidingWindow', o.slidingWindow, 1),
    compressRatios: parseCompressRatios('options.compressRatios', o.compressRatios),
    linearStateSlots: o.linearStateSlots === undefined ? undefined : checkInt('options.linearStateSlots', o.linearStateSlots, 2),
    hostBlocks: o.hostBlocks === undefined ? undefined : checkInt('options.hostBlocks', o.hostBlocks, 2),
    evictionPolicy: replayEvictionPolicy(o),
  };
}

/** The eviction option, checked; only the plain and linear-state replays take one other than 'lru'. */
function replayEvictionPolicy(o: ReplayOptions): EvictionPolicy | undefined {
  const v = o.evictionPolicy;
  if (v === undefined) return undefined;
  parseEvictionPolicy('options.evictionPolicy', v);
  if (v !== 'lru' && (o.slidingWindow !== undefined || o.hostBlocks !== undefined)) {
    throw new TypeError(`options.evictionPolicy '${v}' cannot be combined with ${o.slidingWindow !== undefined ? 'slidingWindow' : 'hostBlocks'}`);
  }
  return v;
}

/**
 * Replays a trace (or the built-in workload) through a fresh BlockManagerPool
 * exactly as REPLAY.md describes and returns the result object.
 */
export async function replay(options: ReplayOptions = {}): Promise<ReplayResult | CompositeReplayResult | HierarchyReplayResult> {
  const p = parseReplayOptions(options);
  await loadCore();
  return replaySync(options, p);
}

/** `replay` once the core is loaded (always the case in Node). */
export function replaySync(
  options: ReplayOptions = {},
  parsed = parseReplayOptions(options),
): ReplayResult | CompositeReplayResult | HierarchyReplayResult {
  const p = parsed;
  const trace = options.trace ?? generateWorkload({ requests: p.workloadRequests, seed: p.seed });
  const modes = [
    p.slidingWindow !== undefined && 'slidingWindow',
    p.linearStateSlots !== undefined && 'linearStateSlots',
    p.hostBlocks !== undefined && 'hostBlocks',
  ].filter((k): k is string => typeof k === 'string');
  if (modes.length > 1) throw new TypeError(`options: ${modes.join(' and ')} cannot be combined`);
  if (p.hostBlocks !== undefined) return replayWithHostTier(trace, { ...p, hostBlocks: p.hostBlocks }, options.onProgress);
  if (p.slidingWindow !== undefined) {
    const pool = new BlockManagerPool(compositePoolOptions(p, p.slidingWindow, p.compressRatios));
    try {
      const target = new CompositeReplayTarget(pool);
      return { ...runReplay(target, trace, p, options.onProgress), subManagers: target.subManagers() };
    } finally {
      pool.dispose();
    }
  }
  const linear = p.linearStateSlots !== undefined;
  const pool = new BlockManagerPool({
    numBlocks: p.numBlocks, blockSize: p.blockSize, seed: p.seed,
    ...(p.evictionPolicy !== undefined && { evictionPolicy: p.evictionPolicy }),
    ...(linear ? { enableLinearState: true, linearStateNumSlots: p.linearStateSlots } : {}),
  });
  try {
    // The priority replay's rule (README "Eviction policies"): generated tokens
    // are never part of a later prompt in a trace, so their blocks go first.
    const plain = new PoolReplayTarget(pool, p.evictionPolicy === 'priority' ? REPLAY_DECODE_PRIORITY : undefined);
    const target = linear ? new LinearStateReplayTarget(plain) : plain;
    return runReplay(target, trace, p, options.onProgress);
  } finally {
    pool.dispose();
  }
}
