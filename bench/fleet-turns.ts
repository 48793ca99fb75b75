// Fleets timed side by side: each kind run in turn, round after round, in
// one process, so that the machine's load falls on all of them alike
// (bench/fleet-time.ts, bench/profile-time.ts).

import { Fleet } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { phase } from './progress.js';

/** Each kind's seconds over `rounds` rounds (after a warm-up round not counted), and the steps of its last run. */
export function fleetsInTurns(kinds: ReadonlyArray<readonly [string, FleetOptions]>, rounds: number): { seconds: number[][]; steps: number[] } {
  const seconds: number[][] = kinds.map(() => []);
  const steps: number[] = kinds.map(() => 0);
  // Round 0 warms the process (the first fleet of a process runs ~1.8x slower) and is not counted.
  for (let round = -1; round < rounds; round++) {
    for (const [i, [name, o]] of kinds.entries()) {
      phase(round < 0 ? `  warm-up: ${name}` : `  round ${round + 1}: ${name}`);
      const f = new Fleet(o);
      try {
        const t = performance.now();
        const run = f.run();
        if (round >= 0) seconds[i]!.push((performance.now() - t) / 1000);
        // A timed fleet's engines step on their own; the step clock counts fleet steps.
        steps[i] = run.latency === undefined ? run.steps : run.latency.engines.reduce((a, e) => a + e.steps, 0);
      } finally {
        f.dispose();
      }
    }
  }
  return { seconds, steps };
}
