// npm run bench:fleet: a large fleet on the Mooncake conversation trace --
// 64 engines of 65,536 blocks each (KVPOOL_FLEET_ENGINES, KVPOOL_FLEET_BLOCKS
// to change) -- for each of four routers, in a fresh process each: the wall
// time of the run, and memory per engine at the end of the run (before the
// pools are disposed) over what the process held before building them: the
// Wasm linear memory (every pool's core state; it only grows) and the
// resident set. One engine of the same size runs first as the reference,
// and least-loaded runs again with the engines on 2 worker threads.

import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import '../bindings/wasm-node.js';
import { plainCore } from '../bindings/core/plain-core.js';
import { Fleet } from '../bindings/fleet/fleet.js';
import type { RouterPolicy } from '../bindings/fleet/routers.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { fleet } from '../bindings/node/fleet-file.js';
import { phase } from './progress.js';

const TRACE = process.env['KVPOOL_TRACE'] ?? 'mooncake-conversation';
const ENGINES = Number(process.env['KVPOOL_FLEET_ENGINES'] ?? 64);
const BLOCKS = Number(process.env['KVPOOL_FLEET_BLOCKS'] ?? 65536);
const ROUTERS: RouterPolicy[] = ['round-robin', 'least-loaded', 'approximate-prefix', 'precise-prefix'];
const MB = 1024 * 1024;

interface Row {
  router: string;
  threads: number;
  engines: number;
  seconds: number;
  hitRate: number;
  wasmPerEngine: number | null;
  rssPerEngine: number;
}

/** One measurement (in the child process). */
async function measure(router: RouterPolicy, engines: number, threads: number): Promise<Row> {
  const trace = await readTraceFile(TRACE);
  const wasm0 = plainCore().memory.buffer.byteLength;
  const rss0 = process.memoryUsage().rss;
  if (threads > 0) {
    // The engines' Wasm memories are the workers': the resident set alone, at the end.
    const t = performance.now();
    const r = await fleet({ trace, engines, router, numBlocks: BLOCKS, threads });
    const seconds = (performance.now() - t) / 1000;
    return { router, threads, engines, seconds, hitRate: r.hitRate, wasmPerEngine: NaN, rssPerEngine: (process.memoryUsage().rss - rss0) / engines / MB };
  }
  const f = new Fleet({ trace, engines, router, numBlocks: BLOCKS });
  try {
    const t = performance.now();
    const r = f.run();
    const seconds = (performance.now() - t) / 1000;
    const wasm = plainCore().memory.buffer.byteLength - wasm0;
    const rss = process.memoryUsage().rss - rss0;
    return { router, threads, engines, seconds, hitRate: r.hitRate, wasmPerEngine: wasm / engines / MB, rssPerEngine: rss / engines / MB };
  } finally {
    f.dispose();
  }
}

const child = process.argv.indexOf('--child');
if (child >= 0) {
  const [router, engines, threads] = [process.argv[child + 1] as RouterPolicy, Number(process.argv[child + 2]), Number(process.argv[child + 3])];
  process.stdout.write(JSON.stringify(await measure(router, engines, threads)));
} else {
  phase(`fleet: ${TRACE}, 1 engine then ${ENGINES} engines of ${BLOCKS} blocks, routers ${ROUTERS.join(', ')}, a process each`, '~2-4 min');
  const rows: Row[] = [];
  const runs: Array<readonly [RouterPolicy, number, number]> = [['round-robin', 1, 0], ...ROUTERS.map((r) => [r, ENGINES, 0] as const), ['least-loaded', ENGINES, 2]];
  for (const [router, engines, threads] of runs) {
    phase(`  ${engines} engine(s), ${router}${threads > 0 ? `, ${threads} threads` : ''}`);
    const out = execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--child', router, String(engines), String(threads)], { encoding: 'utf8' });
    rows.push(JSON.parse(out) as Row);
  }
  console.log(`\nfleet on ${TRACE}, ${BLOCKS} blocks per engine (memory per engine at the end of the run, over the process before the engines were built)\n`);
  console.log('| router | engines | threads | run s | hit rate | Wasm memory MB / engine | RSS MB / engine |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of rows) {
    const wasm = r.wasmPerEngine === null || Number.isNaN(r.wasmPerEngine) ? '–' : r.wasmPerEngine.toFixed(2);
    console.log(`| ${r.router} | ${r.engines} | ${r.threads} | ${r.seconds.toFixed(2)} | ${(r.hitRate * 100).toFixed(2)} % | ${wasm} | ${r.rssPerEngine.toFixed(2)} |`);
  }
}
