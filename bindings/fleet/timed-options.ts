// The options that put a fleet on a millisecond clock (docs/fleet-time.md):
// a timing model, the scheduler each engine runs, its token budget, and how
// requests arrive (the trace's timestamps sped up, or a closed loop).

import { timingModel, type TimingModel, type TimingSpecInput } from '../timing/timing-model.js';
import { checkInt, describe } from '../validate.js';

/**
 * 'xllm': the replay kernel's admission (the exact reference, as on the step
 * clock), each step timed; 'continuous': a vLLM-v1-style step with chunked
 * prefill, a token budget and recompute preemption.
 */
export type FleetScheduler = 'xllm' | 'continuous';

export const FLEET_SCHEDULERS: readonly FleetScheduler[] = ['xllm', 'continuous'];

/** The default token budget of a continuous-batching step (vLLM's max_num_batched_tokens). */
export const DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192;

export interface TimedFleetOptions {
  /**
   * Keep time in milliseconds with this model: `true` for the default
   * polynomial, a spec, or your own TimingModel. Left out (and no
   * 'continuous' scheduler): the step clock.
   */
  timing?: true | TimingSpecInput | TimingModel;
  /** Default 'xllm'; 'continuous' puts the fleet on the millisecond clock (with the default model unless `timing` says). */
  scheduler?: FleetScheduler;
  /** 'continuous' only: prompt plus decode tokens one step computes (default 8192). */
  maxNumBatchedTokens?: number;
  /** Timed, open loop: request r arrives at its timestamp / speedup (default 1). */
  speedup?: number;
  /** Timed, closed loop: keep this many requests in flight over the fleet, in trace order, ignoring timestamps. */
  concurrency?: number;
}

export const TIMED_KEYS = ['timing', 'scheduler', 'maxNumBatchedTokens', 'speedup', 'concurrency'] as const;

/** What the result's `config` echoes of a timed run. */
export interface TimedConfig {
  /** The timing model's name. */
  timing: string;
  scheduler: FleetScheduler;
  /** 'continuous' only. */
  maxNumBatchedTokens?: number;
  speedup: number;
  /** 0: open loop (arrivals from the trace). */
  concurrency: number;
}

export interface ParsedTimedOptions {
  model: TimingModel;
  scheduler: FleetScheduler;
  maxNumBatchedTokens: number;
  speedup: number;
  concurrency: number;
  config: TimedConfig;
}

/** The timed options, checked; undefined when the run is on the step clock (then none of them may be given). */
export function parseTimedOptions(o: TimedFleetOptions & { arrival?: unknown }): ParsedTimedOptions | undefined {
  const scheduler = o.scheduler ?? 'xllm';
  if (!FLEET_SCHEDULERS.includes(scheduler)) throw new RangeError(`options.scheduler must be one of ${FLEET_SCHEDULERS.join(', ')}, got ${describe(scheduler)}`);
  const timed = (o.timing !== undefined && o.timing !== (false as unknown)) || scheduler === 'continuous';
  if (!timed) {
    const stray = TIMED_KEYS.find((k) => k !== 'timing' && k !== 'scheduler' && o[k] !== undefined);
    if (stray !== undefined) throw new RangeError(`options.${stray} applies to a timed fleet: give options.timing (true for the default model) or scheduler 'continuous'`);
    return undefined;
  }
  const model = timingModel(o.timing === true || o.timing === undefined ? undefined : o.timing);
  if (scheduler !== 'continuous' && o.maxNumBatchedTokens !== undefined) throw new RangeError("options.maxNumBatchedTokens applies to scheduler 'continuous'");
  const maxNumBatchedTokens = checkInt('options.maxNumBatchedTokens', o.maxNumBatchedTokens ?? DEFAULT_MAX_NUM_BATCHED_TOKENS, 1);
  const speedup = o.speedup ?? 1;
  if (typeof speedup !== 'number' || !Number.isFinite(speedup) || speedup <= 0) throw new RangeError(`options.speedup must be a finite number > 0, got ${describe(speedup)}`);
  const concurrency = checkInt('options.concurrency', o.concurrency ?? 0, 0);
  if (concurrency > 0 && o.speedup !== undefined) throw new RangeError('options.speedup applies to open-loop arrivals; a closed loop (options.concurrency) ignores timestamps');
  if (concurrency > 0 && o.arrival !== undefined) throw new RangeError('options.arrival applies to open-loop arrivals; a closed loop (options.concurrency) ignores timestamps');
  return {
    model,
    scheduler,
    maxNumBatchedTokens,
    speedup,
    concurrency,
    config: { timing: model.name, scheduler, ...(scheduler === 'continuous' && { maxNumBatchedTokens }), speedup, concurrency },
  };
}
