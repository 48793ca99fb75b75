// Replay with KV-cache events recorded: the pool records events, and before
// each request (and once at the end) the events of the step just finished are
// handed to a sink, so a consumer sees one batch per step.

import { BlockManagerPool } from '../pool/block-manager-pool.js';
import type { KVEvent } from '../managers/kv-events.js';
import type { Sequence } from '../pool/sequence.js';
import { runReplay, type ReplayResult } from './kernel.js';
import { parseReplayOptions, PoolReplayTarget, type ReplayOptions } from './replay.js';
import { generateWorkload } from './workload.js';

/** Receives the events of one step (one request: its prefill and decode), `step` counting from 0. */
export type ReplayEventSink = (events: KVEvent[], step: number) => void;

class EventTarget extends PoolReplayTarget {
  private step = -1;
  constructor(
    pool: BlockManagerPool,
    private readonly sink: ReplayEventSink,
  ) {
    super(pool);
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

/** `replaySync` with event recording on; the results are the same as without. */
export function replayWithEvents(options: ReplayOptions, sink: ReplayEventSink): ReplayResult {
  const p = parseReplayOptions(options);
  if (typeof sink !== 'function') throw new TypeError('sink must be a function');
  for (const k of ['slidingWindow', 'linearStateSlots', 'hostBlocks'] as const) {
    if (p[k] !== undefined) throw new TypeError(`options.${k} cannot be combined with event recording (events come from the plain pool)`);
  }
  const trace = options.trace ?? generateWorkload({ requests: p.workloadRequests, seed: p.seed });
  const pool = new BlockManagerPool({ numBlocks: p.numBlocks, blockSize: p.blockSize, seed: p.seed });
  try {
    const target = new EventTarget(pool, sink);
    const result = runReplay(target, trace, p, options.onProgress);
    target.flush();
    return result;
  } finally {
    pool.dispose();
  }
}
