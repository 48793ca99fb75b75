// npm run bench:vllm: the vLLM engine's speed. The whole Mooncake
// conversation trace replayed on the xllm engine (the default replay) and on
// the vllm engine with a token budget of 8192 (`--engine vllm
// --max-num-batched-tokens 8192`), in turns, ROUNDS times after a round to
// warm up, in one process: the medians, and the median of each round's own
// ratio (the two runs of a round are close in time, which cancels this
// machine's drift), in loop seconds (wall) and in CPU seconds of the whole
// call (what the process itself spent: on this shared machine other
// processes stretch wall time, not that). The budget: vllm within
// 1.5x of xllm. Then the vllm replay against the vLLM harness's own loop on
// the same trace and configuration, measured once (bench/README.md): the
// budget is 100x faster.

import '../bindings/wasm-node.js';
import { replaySync } from '../bindings/engines/replay.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { phase } from './progress.js';
import { median } from './median.js';

const TRACE = process.env['KVPOOL_TRACE'] ?? 'mooncake-conversation';
const ROUNDS = Number(process.env['KVPOOL_ROUNDS'] ?? 5);
/** The vLLM harness (sched_replay.py) on this trace with --max-num-batched-tokens 8192, measured once (bench/README.md): its loop's wall seconds, and the CPU seconds of its process. */
const HARNESS_SECONDS = 92.9;
const HARNESS_CPU_SECONDS = 76.6;

const trace = await readTraceFile(TRACE);
const kinds = [
  ['xllm (the default replay)', () => replaySync({ trace })],
  ['vllm, --max-num-batched-tokens 8192', () => replaySync({ engine: 'vllm', trace, maxNumBatchedTokens: 8192 })],
] as const;

phase(`vllm engine: ${TRACE}, xllm and vllm in turns, ${ROUNDS} rounds`, '~10-30 s');
const seconds: number[][] = kinds.map(() => []);
const wall: number[][] = kinds.map(() => []);
const cpu: number[][] = kinds.map(() => []);
let checksum = '';
for (let round = -1; round < ROUNDS; round++) {
  for (const [i, [name, run]] of kinds.entries()) {
    phase(round < 0 ? `  warm-up: ${name}` : `  round ${round + 1}: ${name}`);
    const t = performance.now();
    const c0 = process.cpuUsage();
    const r = run();
    const c = process.cpuUsage(c0);
    const w = (performance.now() - t) / 1000;
    if (i === 1) checksum = `${r.idChecksum}, hit rate ${r.hitRate}`;
    if (round >= 0) {
      seconds[i]!.push(r.seconds);
      wall[i]!.push(w);
      cpu[i]!.push((c.user + c.system) / 1e6);
    }
  }
}
const ratio = (xs: number[][]) => `${(median(xs[1]!) / median(xs[0]!)).toFixed(2)}x of the medians, ${median(xs[1]!.map((v, k) => v / xs[0]![k]!)).toFixed(2)}x the median round`;
console.log(`\nthe vLLM engine on ${TRACE}: median of ${ROUNDS} rounds in turns (loop: the replay loop's wall seconds; wall: the whole call; CPU: the process's CPU seconds during the call)\n`);
console.log('| run | loop s | wall s | CPU s |');
console.log('| --- | ---: | ---: | ---: |');
for (const [i, [name]] of kinds.entries()) console.log(`| ${name} | ${median(seconds[i]!).toFixed(3)} | ${median(wall[i]!).toFixed(3)} | ${median(cpu[i]!).toFixed(3)} |`);
console.log(`\nvllm / xllm, loop seconds: ${ratio(seconds)}; CPU seconds: ${ratio(cpu)} (budget 1.5x)`);
console.log(`vllm's id checksum ${checksum} (the vLLM harness: 3378426172, hit rate 0.053208)`);
if (TRACE === 'mooncake-conversation') {
  console.log(
    `the vLLM harness on the same trace and budget, measured once: its loop ${HARNESS_SECONDS} s, its process ${HARNESS_CPU_SECONDS} CPU s: ` +
      `kvpool is ${(HARNESS_SECONDS / median(seconds[1]!)).toFixed(0)}x faster in loop seconds, ${(HARNESS_CPU_SECONDS / median(cpu[1]!)).toFixed(0)}x in CPU seconds (budget 100x)`,
  );
}
