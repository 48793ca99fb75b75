// The contract between a timed fleet and one of its engines (docs/fleet-time.md):
// the fleet says when a step begins and when it ends; the engine's scheduler
// decides what the step computes, makes the step's pool operations at its
// beginning, reports the batch for the timing model, and stamps the
// requests' clocks.

import type { BlockManagerPool } from '../pool/block-manager-pool.js';
import type { HierarchyBlockManagerPool } from '../pool/hierarchy-block-manager-pool.js';
import type { StepBatch } from '../timing/timing-model.js';
import type { EngineEvents } from './engine-events.js';
import type { TimedEngineFigures } from './fleet-latency.js';
import type { FleetConfig } from './fleet-options.js';
import type { EngineRun } from './step-engine.js';

export interface TimedEngine {
  /** Sequences it runs (decoding or, with 'continuous' and 'vllm', prefilling). */
  readonly running: number;
  readonly queued: number;
  readonly load: number;
  /** Steps begun. */
  readonly steps: number;
  /** Sequences finished before their output ended (xllm: by the kernel, to make room; continuous: truncated; vllm: dropped after giving tokens). */
  readonly finishedEarly: number;
  enqueue(r: number): void;
  /** Begins a step at `ms` (only while load > 0): schedules it, makes its pool operations and fills `batch`. */
  begin(ms: number, batch: StepBatch): void;
  /** The step begun last ended at `ms`: its tokens are out. */
  end(ms: number): void;
  /** After the run: releases what it still holds. */
  drain(): void;
  /** Hands the KV events since the last flush to `events` (engine `i`, `ts` seconds, its step `step`). */
  flushEvents(events: EngineEvents, i: number, ts: number, step: number): void;
  result(config: FleetConfig): EngineRun;
  figures(engine: number): Omit<TimedEngineFigures, 'utilisation'>;
  dispose(): void;
}


/** Blocks the host tier has loaded so far (0 for a pool without one). */
export function hostLoaded(pool: BlockManagerPool): number {
  const h = pool as Partial<HierarchyBlockManagerPool>;
  if (typeof h.hierarchyStats !== 'function') return 0;
  let n = 0;
  for (const s of h.hierarchyStats.call(pool)) n += s.blocksLoaded;
  return n;
}
