// The load-aware score both prefix routers rank engines by (docs/fleet.md):
// the share of the prompt's full blocks an engine holds, against its load as
// a share of its slots, each weighted. Computed in integers (scaled by
// n * maxRunning) so that every implementation ranks engines identically.

import { checkInt } from '../validate.js';
import { argmax, type FleetView } from './router.js';

export interface PrefixScoreWeights {
  /** Weight of the matched share of the prompt (default 1). */
  prefixWeight?: number;
  /** Weight of the load share of the slots (default 1). */
  loadWeight?: number;
}

export interface ParsedWeights {
  prefixWeight: number;
  loadWeight: number;
}

/** Weights are integers in [0, 1000]: exact integer scores. */
export function parseWeights(w: PrefixScoreWeights, where = 'options'): ParsedWeights {
  return {
    prefixWeight: checkInt(`${where}.prefixWeight`, w.prefixWeight ?? 1, 0, 1000),
    loadWeight: checkInt(`${where}.loadWeight`, w.loadWeight ?? 1, 0, 1000),
  };
}

/**
 * The engine maximising `prefixWeight * matched(e) * maxRunning - loadWeight *
 * load(e) * max(n, 1)` (n: the prompt's full blocks), ties to the lowest index.
 */
export function bestByPrefixAndLoad(fleet: FleetView, n: number, matched: (e: number) => number, w: ParsedWeights): number {
  const scale = Math.max(n, 1);
  return argmax(fleet.engines, (e) => w.prefixWeight * matched(e) * fleet.maxRunning - w.loadWeight * fleet.load(e) * scale);
}
