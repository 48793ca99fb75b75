// npm run bench:fleet-time: what keeping time costs. A 64-engine fleet
// (KVPOOL_FLEET_ENGINES) on the Mooncake conversation trace, least-loaded
// router, run on the step clock, then timed with scheduler 'xllm' (the
// same kernel, each step timed by the default model), then with scheduler
// 'continuous' — in turns, ROUNDS times, in one process; the medians and
// their ratios to the step clock's. The budget: 'xllm' timed within
// 1.5x of the step clock.

import '../bindings/wasm-node.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { fleetsInTurns } from './fleet-turns.js';
import { median } from './median.js';
import { phase } from './progress.js';

const TRACE = process.env['KVPOOL_TRACE'] ?? 'mooncake-conversation';
const ENGINES = Number(process.env['KVPOOL_FLEET_ENGINES'] ?? 64);
const ROUNDS = Number(process.env['KVPOOL_ROUNDS'] ?? 3);

const trace = await readTraceFile(TRACE);
const base: FleetOptions = { trace, engines: ENGINES, router: 'least-loaded' };
const kinds: Array<[string, FleetOptions]> = [
  ['step clock', base],
  ["timed, scheduler 'xllm'", { ...base, timing: true }],
  ["timed, scheduler 'continuous'", { ...base, scheduler: 'continuous' }],
];

phase(`fleet time: ${TRACE}, ${ENGINES} engines, least-loaded, ${kinds.length} kinds in turns, ${ROUNDS} rounds`, '~1-3 min');
const { seconds } = fleetsInTurns(kinds, ROUNDS);
const ref = median(seconds[0]!);
console.log(`\nfleet time on ${TRACE}: ${ENGINES} engines, least-loaded, median of ${ROUNDS} runs in turns\n`);
console.log('| run | s (median) | ratio to the step clock |');
console.log('| --- | ---: | ---: |');
for (const [i, [name]] of kinds.entries()) console.log(`| ${name} | ${median(seconds[i]!).toFixed(2)} | ${(median(seconds[i]!) / ref).toFixed(2)}x |`);
