// How many requests one engine of a fleet runs at once, as routers see it
// (FleetView.maxRunning, docs/fleet.md, routers).

import type { ParsedFleetOptions } from './fleet-options.js';

/** maxRunning (xllm), or maxNumSeqs on each of the engine's dp ranks (vllm: each rank is a scheduler of its own). */
export function engineSlots(p: ParsedFleetOptions): number {
  return p.vllm === undefined ? p.replay.maxRunning : p.vllm.maxNumSeqs * p.vllm.dpSize;
}
