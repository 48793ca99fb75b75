// npm run bench:profile-time: what timing a fleet by a GPU profile costs. A
// 64-engine fleet (KVPOOL_FLEET_ENGINES) on the Mooncake conversation trace,
// least-loaded router, run on the step clock, then timed with scheduler
// 'xllm' by the default polynomial and by the profile
// rtxpro6000/llama-3.1-8b, then with scheduler 'continuous' by the same two,
// then the same fleet of vLLM engines (engine 'vllm', its default 8192-token
// budget) on the step clock and timed by the two — in turns, ROUNDS times,
// in one process; the medians and their ratios to the step clock of the
// same engine, and the engine steps each run timed. The budgets (issues 46
// and 44): a profile-timed fleet within 2x of its step clock.

import '../bindings/wasm-node.js';
import '../bindings/node/profile-files.js';
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
const profile = { kind: 'profile', profile: 'rtxpro6000/llama-3.1-8b' } as const;
const vllm: FleetOptions = { ...base, engine: 'vllm' };
const kinds: Array<[string, FleetOptions]> = [
  ['step clock', base],
  ["timed, 'xllm', polynomial", { ...base, timing: true }],
  ["timed, 'xllm', profile", { ...base, timing: profile }],
  ["timed, 'continuous', polynomial", { ...base, scheduler: 'continuous' }],
  ["timed, 'continuous', profile", { ...base, scheduler: 'continuous', timing: profile }],
  ["engine 'vllm', step clock", vllm],
  ["engine 'vllm', timed, polynomial", { ...vllm, timing: true }],
  ["engine 'vllm', timed, profile", { ...vllm, timing: profile }],
];

phase(`profile time: ${TRACE}, ${ENGINES} engines, least-loaded, ${kinds.length} kinds in turns, ${ROUNDS} rounds`, '~2-5 min');
const { seconds, steps } = fleetsInTurns(kinds, ROUNDS);
const ref = median(seconds[0]!);
const vllmAt = kinds.findIndex(([, o]) => o.engine === 'vllm');
console.log(`\nprofile time on ${TRACE}: ${ENGINES} engines, least-loaded, median of ${ROUNDS} runs in turns\n`);
console.log("| run | s (median) | ratio to its engine's step clock | ratio to the xllm step clock | steps |");
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const [i, [name, o]] of kinds.entries()) {
  const own = median(seconds[o.engine === 'vllm' ? vllmAt : 0]!);
  const clock = o.timing === undefined && o.scheduler === undefined;
  console.log(`| ${name} | ${median(seconds[i]!).toFixed(2)} | ${(median(seconds[i]!) / own).toFixed(2)}x | ${(median(seconds[i]!) / ref).toFixed(2)}x | ${steps[i]!.toLocaleString('en-US')}${clock ? ' fleet steps' : ' engine steps'} |`);
}
