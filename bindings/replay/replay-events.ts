// Replay with KV-cache events recorded: the pool records events, and before
// each request (and once at the end) the events of the step just finished are
// handed to a sink, so a consumer sees one batch per step.

import { BlockManagerPool } from '../pool/block-manager-pool.js';
import type { KVEvent } from '../managers/kv-events.js';
import type { Sequence } from '../pool/sequence.js';
import { runReplay } from './stepper.js';
import {
  completeRun, parseReplayOptions, PoolReplayTarget, REPLAY_DECODE_PRIORITY, replayConfig, replayMode, traceArg,
  type PlainReplayRun, type ReplayOptions,
} from './replay.js';
import { generateWorkload } from './workload.js';

/** Receives the events of one step (one request: its prefill and decode), `step` counting from 0. */
export type ReplayEventSink = (events: KVEvent[], step: number) => void;

class EventTarget extends PoolReplayTarget {
  private step = -1;
  constructor(
    pool: BlockManagerPool,
    private readonly sink: ReplayEventSink,
    decodePriority: number | undefined,
  ) {
    super(pool, decodePriority);
    pool.recordEvents(true);
  }
  override newSequence(buffer: Int32Array, promptLength: number): Sequence {
    this.flush();
    this.step++;
    return super.newSequence(buffer, promptLength);
  }
  /** Hands over what the current step recorded (nothing before the first step). */
  flush(): void {
    const events = this.pool.drainEvents();
    if (events.length > 0) this.sink(events, Math.max(this.step, 0));
  }
}

/**
 * `replaySync` with event recording on (plain mode only); the results are
 * the same as without. `traceName` as replaySync's.
 */
export function replayWithEvents(options: ReplayOptions, sink: ReplayEventSink, traceName?: string): PlainReplayRun {
  const p = parseReplayOptions(options);
  if (typeof sink !== 'function') throw new TypeError('sink must be a function');
  if (replayMode(p) !== 'plain') {
    const k = p.hostBlocks > 0 ? 'hostBlocks' : p.slidingWindow !== undefined ? 'slidingWindow' : 'linearStateSlots';
    throw new TypeError(`options.${k} cannot be combined with event recording (events come from the plain pool)`);
  }
  const given = traceArg(options);
  const trace = given ?? generateWorkload({ requests: p.requests, seed: p.seed });
  const pool = new BlockManagerPool({
    numBlocks: p.numBlocks, blockSize: p.blockSize, seed: p.seed, dpSize: p.dpSize,
    ...(p.eviction !== 'lru' && { evictionPolicy: p.eviction }),
  });
  try {
    const target = new EventTarget(pool, sink, p.eviction === 'priority' ? REPLAY_DECODE_PRIORITY : undefined);
    const result = runReplay(target, trace, p, options.onProgress);
    target.flush();
    const config = replayConfig(p, given === undefined ? undefined : (traceName ?? 'requests'));
    return completeRun<PlainReplayRun>({ mode: 'plain', ...result }, config, pool);
  } finally {
    pool.dispose();
  }
}
