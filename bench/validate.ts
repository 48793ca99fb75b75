// npm run bench:validate: how long `kvpool validate` takes on the shipped
// 300-request runs (measured/), set beside vLLM's own scheduler scheduling
// the same requests and the peer simulator predicting the same run.
//
// In this fresh process, per run: its profile read and parsed
// (readProfileBundle: once per process, as vLLM loads its model once), then
// the run validated a first time (the code still cold: what one `kvpool
// validate` spends past start-up) and ROUNDS more times in turns (medians);
// then `kvpool validate` as a whole command, node's start-up included, when
// the package is built (dist/). Then a calibration of both runs. The
// comparisons are figures measured once (bench/README.md): vLLM's own
// Scheduler and KVCacheManager (sched_replay.py of the team's vLLM harness,
// sync scheduling) on a trace of each run's lengths, max_num_seqs 128,
// max_num_batched_tokens 2048: its loop's wall seconds, its imports and
// set-up apart; and the peer simulator's time per run as issue 46 gives it
// (about 6 minutes). Budgets: 5x faster than the first, 100x than the second.

import '../bindings/wasm-node.js';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readProfileBundle } from '../bindings/node/profile-files.js';
import { readMeasuredRun } from '../bindings/node/measured-files.js';
import { validateRun } from '../bindings/measured/validate-run.js';
import { calibrate } from '../bindings/measured/calibrate.js';
import { loadCore } from '../bindings/core/plain-core.js';
import { phase } from './progress.js';
import { median } from './median.js';

const ROUNDS = Number(process.env['KVPOOL_ROUNDS'] ?? 7);
/** vLLM's scheduler on each run's requests (sched_replay.py, loop wall seconds), measured once: bench/README.md. */
const VLLM_SCHEDULER_SECONDS: Record<string, number> = { 'rtxpro6000-llama-3.1-8b': 1.82, 'rtxpro6000-qwen3-32b': 1.82 };
/** The peer simulator per run, as issue 46 gives it: about 6 minutes. */
const PEER_SECONDS = 360;

const RUNS = [
  ['rtxpro6000-llama-3.1-8b', 'rtxpro6000/llama-3.1-8b'],
  ['rtxpro6000-qwen3-32b', 'rtxpro6000/qwen3-32b'],
] as const;

await loadCore();
phase(`validate: the two shipped runs, profile read, a first validation, then ${ROUNDS} rounds in turns`, '~5 s');
const read: number[] = [];
const first: number[] = [];
const warm: number[][] = RUNS.map(() => []);
const seconds = (t: number) => (performance.now() - t) / 1000;
for (const [, profile] of RUNS) {
  const t = performance.now();
  readProfileBundle(profile);
  read.push(seconds(t));
}
for (const [name, profile] of RUNS) {
  const t = performance.now();
  validateRun(readMeasuredRun(name), { profile });
  first.push(seconds(t));
}
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, [name, profile]] of RUNS.entries()) {
    const t = performance.now();
    validateRun(readMeasuredRun(name), { profile });
    warm[i]!.push(seconds(t));
  }
}
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist/cli/main.js');
const whole: Array<number | null> = RUNS.map(([name, profile]) => {
  if (!existsSync(cli)) return null;
  phase(`  kvpool validate ${name}, the whole command`);
  const t = performance.now();
  const r = spawnSync(process.execPath, [cli, 'validate', name, '--profile', profile, '--json'], { encoding: 'utf8' });
  return r.status === 0 ? seconds(t) : null;
});
phase('calibrate: both runs', '~3-6 s');
const tc = performance.now();
const c = calibrate(RUNS.map(([name, profile]) => ({ run: readMeasuredRun(name), profile })));
const calibrateSeconds = seconds(tc);

const s3 = (x: number | null) => (x === null ? '-' : x.toFixed(3));
console.log('\nkvpool validate on a 300-request measured run (s): the profile read once; the run read, replayed on one timed engine and compared\n');
console.log('| run | profile read | first validation | median of later | whole command | vLLM scheduler | faster (first) | faster (later) | peer | faster (first) |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const [i, [name]] of RUNS.entries()) {
  const v = VLLM_SCHEDULER_SECONDS[name]!;
  const m = median(warm[i]!);
  console.log(`| ${name} | ${s3(read[i]!)} | ${s3(first[i]!)} | ${s3(m)} | ${s3(whole[i]!)} | ${v} | ${(v / first[i]!).toFixed(1)}x | ${(v / m).toFixed(0)}x | ${PEER_SECONDS} | ${(PEER_SECONDS / first[i]!).toFixed(0)}x |`);
}
if (whole.some((w) => w === null)) console.log('\n(whole command: run `npm run build:ts` first; dist/cli/main.js is not there)');
console.log(`\nbudgets: 5x faster than vLLM's scheduler, 100x than the peer; calibrate, both runs: ${calibrateSeconds.toFixed(2)} s (largest error after ${Math.max(...c.runs.flatMap((r) => [r.after.ttftMs, r.after.tpotMs, r.after.e2eMs].flatMap((p) => [Math.abs(p.mean), Math.abs(p.p99)]))).toFixed(2)} %)`);
