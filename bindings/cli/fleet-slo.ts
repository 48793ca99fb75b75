// `kvpool fleet --slo-ttft-ms/--slo-itl-ms`: for each router given, the
// library's sloSearch over the engine counts (smallest first, stopping at
// the first that meets the targets; only the largest when the TTFT floor
// shows none can), and the answer it gives, with the floor's reason.

import type { FleetOptions } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import type { RouterPolicy } from '../fleet/routers.js';
import { sloSearch, type SloTargets } from '../fleet/slo-search.js';
import { sloAnswer, type SloAnswer } from '../fleet/slo-answer.js';

/** Every run made (router by router, engine counts ascending) and each router's answer. */
export function fleetSloSearch(
  shared: FleetOptions,
  routers: readonly RouterPolicy[],
  slo: SloTargets,
  counts: number | readonly number[],
  traceName: string | undefined,
  progress: (label: string) => FleetOptions['onProgress'],
): { runs: FleetRun[]; answers: SloAnswer[] } {
  const runs: FleetRun[] = [];
  const answers: SloAnswer[] = [];
  for (const router of routers) {
    const onProgress = progress(`SLO search, ${router}`);
    const found = sloSearch({ ...shared, router, ...(onProgress && { onProgress }) }, slo, counts, traceName);
    runs.push(...found.runs);
    const a = sloAnswer(router, found.runs, slo);
    answers.push(found.why === undefined ? a : { ...a, why: found.why, skipped: found.skipped });
  }
  return { runs, answers };
}
