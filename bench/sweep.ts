// npm run bench (second part): a sweep of 12 configurations of the Mooncake
// conversation trace on every core, against the same 12 replays run one
// after the other in this thread. The issue's target: the sweep's wall time
// within 1.3x of (sum of the single runs) / cores. Worker start-up, the
// trace handed to each worker and the report-free result collection are all
// inside the sweep's wall time.

import { availableParallelism } from 'node:os';
import '../bindings/wasm-node.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { sweep, sweepConfigurations, type SweepGrid } from '../bindings/node/sweep.js';
import { replaySync } from '../bindings/replay/replay.js';
import { phase, progress } from './progress.js';

const TRACE = process.env['KVPOOL_TRACE'] ?? 'mooncake-conversation';
const grid: SweepGrid = { numBlocks: [16384, 65536], eviction: ['lru', 'lfu', 'priority'], blockSize: [16, 32] };
const cores = availableParallelism();

const trace = await readTraceFile(TRACE);
const configs = sweepConfigurations({ trace }, grid);
phase(`sweep: ${configs.length} configurations of ${TRACE}, one after the other, then on ${cores} worker threads`, '~1 min');

const single: number[] = [];
const bar = progress('single runs', configs.length);
for (const [i, c] of configs.entries()) {
  bar.update(i, `${c.numBlocks}/${c.eviction}/${c.blockSize}`);
  const t = performance.now();
  replaySync(c);
  single.push((performance.now() - t) / 1000);
}
bar.update(configs.length);
bar.stop();

const sbar = progress('sweep', configs.length);
const t = performance.now();
const runs = await sweep({ trace, grid, onProgress: (p) => sbar.update(p.runsDone, 'runs') });
const wall = (performance.now() - t) / 1000;
sbar.stop();

const sum = single.reduce((a, b) => a + b, 0);
const ideal = sum / cores;
console.log(`\nSweep of ${runs.length} configurations (${TRACE}; --num-blocks 16384,65536 --eviction lru,lfu,priority --block-size 16,32)`);
console.log('| single runs, one after the other (s) | sum / cores (s) | sweep on ' + cores + ' workers (s) | sweep / (sum / cores) | target |');
console.log('| ---: | ---: | ---: | ---: | --- |');
console.log(`| ${sum.toFixed(1)} | ${ideal.toFixed(1)} | ${wall.toFixed(1)} | ${(wall / ideal).toFixed(2)}x | <= 1.3x: ${wall / ideal <= 1.3 ? 'met' : 'missed'} |`);
console.log(`Longest single run ${Math.max(...single).toFixed(1)} s, shortest ${Math.min(...single).toFixed(1)} s; per configuration: ${configs.map((c, i) => `${c.numBlocks}/${c.eviction}/${c.blockSize} ${single[i]!.toFixed(1)}`).join(', ')}.`);
console.log('The machine is shared: another process on a core stretches the sweep, not the single runs measured before it. Read it with the load average.');
