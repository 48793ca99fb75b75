// The contract between a fleet and its router (docs/fleet.md, routers): what
// a router is shown of a request and of the engines, and what it answers.
// Users implement `Router` to try their own policy on a trace; the built-in
// policies live one per file next to this one.

import type { TraceRequest } from '../replay/trace.js';

/** A request as a router sees it at the moment it is routed. */
export interface RouteRequest {
  /** Its 0-based line in the trace. */
  readonly index: number;
  readonly request: TraceRequest;
  /** The step it arrived (and is routed) in. */
  readonly step: number;
  /** Its prompt tokens (the replay kernel's tokens; computed on first use, then kept). */
  tokens(): Int32Array;
  /**
   * The chained XXH3-128 keys of its full prompt blocks, 16 bytes each, with
   * the engines' block size and seed: the keys the engines' prefix caches use
   * (computed on first use, then kept).
   */
  blockHashes(): Uint8Array;
  /** Full prompt blocks: `floor(inputLength / blockSize)`. */
  readonly fullBlocks: number;
}

/** What a router may read of the fleet while it routes. */
export interface FleetView {
  /** Number of engines; a router answers an index in [0, engines). */
  readonly engines: number;
  /** The engines' `maxRunning` (the same for all). */
  readonly maxRunning: number;
  /**
   * Engine `e`'s load right now: requests decoding on it plus requests
   * queued for it (requests routed earlier in the same step included).
   */
  load(e: number): number;
  running(e: number): number;
  queued(e: number): number;
}

/**
 * A routing policy. `route` is called once per request, in trace order, and
 * must return an engine index; it may keep state (what it routed, what it
 * learned from events). A router serves one fleet run.
 */
export interface Router {
  /** A short name, echoed in the result's configuration. */
  readonly name: string;
  route(req: RouteRequest, fleet: FleetView): number;
  /**
   * Optional: engine `e`'s KV-cache events of the step just run, as vLLM
   * KVEventBatch payloads (msgpack), called at the end of every step for
   * every engine with events, engines in index order. A router without this
   * method is not sent events (and the engines do not record them for it).
   */
  onEvents?(e: number, batches: readonly Uint8Array[]): void;
}

/** The engine with the highest score; ties go to the lowest index. */
export function argmax(n: number, score: (e: number) => number): number {
  let best = 0;
  let bestScore = score(0);
  for (let e = 1; e < n; e++) {
    const s = score(e);
    if (s > bestScore) {
      best = e;
      bestScore = s;
    }
  }
  return best;
}
