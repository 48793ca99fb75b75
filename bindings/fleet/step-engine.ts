// What the step clock (docs/fleet.md) asks of a fleet's engine, whichever
// engine it is: the xllm engine (FleetEngine: the replay kernel's pool) or
// the vllm engine (VllmFleetEngine: vLLM's scheduler and block pool).

import type { ReplayRun } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';
import type { VllmReplayRun } from '../vllm/replay.js';
import type { EngineEvents } from './engine-events.js';
import type { FleetConfig } from './fleet-options.js';

/** An engine's whole result, as replay() reports one for its engine. */
export type EngineRun = ReplayRun | VllmReplayRun;

export interface StepEngine {
  /** Requests it runs now (xllm: decoding; vllm: in its schedulers' running lists). */
  readonly running: number;
  /** Requests waiting for it (vllm: preempted ones too). */
  readonly queued: number;
  /** running + queued. */
  readonly load: number;
  /** Requests finished before their output ended (xllm: by the kernel, to make room; vllm: dropped after giving tokens). */
  readonly finishedEarly: number;
  enqueue(r: number): void;
  /** Start of step `t`. */
  tick(t: number): void;
  /** The rest of step `t`: admissions (each told to `wait`), and what the engine does in the step. */
  admit(t: number, requests: readonly TraceRequest[], wait: (r: number) => void): void;
  /** After the last step: gives back what it still holds. */
  drain(): void;
  /** Hands the KV events since the last flush to `events` (engine `i`, `ts` seconds, step `step`). */
  flushEvents(events: EngineEvents, i: number, ts: number, step: number): void;
  result(config: FleetConfig): EngineRun;
  dispose(): void;
}
