// Replay with KV-cache events recorded: the pool records events, and before
// each request (and once at the end) the events of the step just finished
// are handed over, so a consumer sees one batch per step. Any mode: a host
// tier's blocks are announced with medium "CPU"; a composite pool keeps no
// prefix cache, so it announces nothing.

import type { KVEvent } from '../managers/kv-events.js';
import type { BlockManagerPool } from '../pool/block-manager-pool.js';
import { checkObject } from '../validate.js';
import type { ReplaySequence, ReplayTarget } from './kernel.js';
import { openReplay, parseReplayOptions, replayConfig, traceArg, type OpenReplay, type ReplayOptions, type ReplayRun } from './replay.js';
import { ReplayStepper } from './stepper.js';
import { generateWorkload } from './workload.js';

/** Receives the events of one step (one request: its prefill and decode), `step` counting from 0. */
export type ReplayEventSink = (events: KVEvent[], step: number) => void;

/** @internal Called with the pool when step `step`'s events wait to be drained (the callee drains them). */
export type ReplayStepHook = (pool: BlockManagerPool, step: number) => void;

/** The loop's target, with the events of each finished step handed over before the next request. */
function eventTarget(inner: ReplayTarget<ReplaySequence>, flush: () => void): ReplayTarget<ReplaySequence> {
  const t: ReplayTarget<ReplaySequence> = {
    newSequence: (buffer, promptLength, outputsFrom) => {
      flush();
      return inner.newSequence(buffer, promptLength, outputsFrom);
    },
    allocate: (seq, numTokens) => inner.allocate(seq, numTokens),
    cache: (seq) => inner.cache(seq),
    deallocate: (seq) => inner.deallocate(seq),
    blocksEvicted: () => inner.blocksEvicted(),
    numFreeBlocks: () => inner.numFreeBlocks(),
    numBlocksInPrefixCache: () => inner.numBlocksInPrefixCache(),
  };
  if (inner.prefilled) t.prefilled = (seq) => inner.prefilled!(seq);
  if (inner.extraResult) t.extraResult = () => inner.extraResult!();
  if (inner.recycle) t.recycle = (seq) => inner.recycle!(seq);
  if (inner.blockIds) t.blockIds = (seq) => inner.blockIds!(seq);
  return t;
}

/**
 * @internal A replay of the options' mode with events recorded, stepped one
 * request at a time (the CLI yields between steps while it publishes).
 */
export class EventReplay {
  private readonly open: OpenReplay;
  private readonly stepper: ReplayStepper<ReplaySequence>;
  private readonly config: ReturnType<typeof replayConfig>;
  private stepNo = -1;

  constructor(options: ReplayOptions, private readonly hook: ReplayStepHook, traceName?: string) {
    const p = parseReplayOptions(options);
    if (typeof hook !== 'function') throw new TypeError('sink must be a function');
    const given = traceArg(options);
    const trace = given ?? generateWorkload({ requests: p.requests, seed: p.seed });
    this.config = replayConfig(p, given === undefined ? undefined : (traceName ?? 'requests'));
    this.open = openReplay(p);
    try {
      // Events go out step by step: nobody takes snapshots.
      this.open.pool.recordEvents(true);
      const target = eventTarget(this.open.target, () => this.flush());
      const { blockSize, maxRunning, publishAfterPrefill, limit } = p;
      this.stepper = new ReplayStepper(target, trace, { blockSize, maxRunning, publishAfterPrefill, limit });
    } catch (e) {
      this.open.pool.dispose();
      throw e;
    }
  }

  get total(): number {
    return this.stepper.total;
  }

  get done(): number {
    return this.stepper.done;
  }

  /** Runs one request (or the final drain); false once finished. */
  step(): boolean {
    return this.stepper.step() !== null;
  }

  /** Hands over the current step's events (nothing before the first step). */
  private flush(): void {
    this.hook(this.open.pool, Math.max(this.stepNo, 0));
    this.stepNo++;
  }

  /** After the last step: hands over the last events and returns the result (the same as without events). */
  finish(): ReplayRun {
    this.flush();
    return this.open.finish(this.stepper.result(), this.config);
  }

  dispose(): void {
    this.open.pool.dispose();
  }
}

/**
 * `replaySync` with event recording on: `sink` gets each step's events (one
 * call per step that has any). The results are the same as without. Any mode
 * (see the file's header); `traceName` as replaySync's.
 */
export function replayWithEvents(options: ReplayOptions, sink: ReplayEventSink, traceName?: string): ReplayRun {
  checkObject('options', options);
  if (typeof sink !== 'function') throw new TypeError('sink must be a function');
  return replayWithEventHook(
    options,
    (pool, step) => {
      const events = pool.drainEvents();
      if (events.length > 0) sink(events, step);
    },
    traceName,
  );
}

/** @internal replayWithEvents with the draining left to `hook` (the wire encoders read records in place). */
export function replayWithEventHook(options: ReplayOptions, hook: ReplayStepHook, traceName?: string): ReplayRun {
  const r = new EventReplay(options, hook, traceName);
  try {
    const total = r.total;
    const every = Math.max(1, Math.floor(total / 200));
    while (r.step()) {
      const done = r.done;
      if (options.onProgress && done % every === 0 && done < total) options.onProgress(done, total);
    }
    options.onProgress?.(total, total);
    return r.finish();
  } finally {
    r.dispose();
  }
}
