// npm run bench:fleet: a large fleet on the Mooncake conversation trace --
// 64 engines of 65,536 blocks each (KVPOOL_FLEET_ENGINES, KVPOOL_FLEET_BLOCKS
// to change) -- for each of three routers: the wall time of the run, and the
// memory the engines take (resident set, JS heap and array buffers, which
// hold the Wasm memory) measured across building them, per engine. One
// engine of the same size runs first as the reference.

import '../bindings/wasm-node.js';
import { Fleet } from '../bindings/fleet/fleet.js';
import type { RouterPolicy } from '../bindings/fleet/routers.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { phase } from './progress.js';

const TRACE = process.env['KVPOOL_TRACE'] ?? 'mooncake-conversation';
const ENGINES = Number(process.env['KVPOOL_FLEET_ENGINES'] ?? 64);
const BLOCKS = Number(process.env['KVPOOL_FLEET_BLOCKS'] ?? 65536);
const ROUTERS: RouterPolicy[] = ['round-robin', 'least-loaded', 'approximate-prefix'];

const trace = await readTraceFile(TRACE);
const MB = 1024 * 1024;

function memory(): { rss: number; heap: number; buffers: number } {
  globalThis.gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, buffers: m.arrayBuffers };
}

interface Row {
  router: string;
  engines: number;
  seconds: number;
  hitRate: number;
  rssPerEngine: number;
  buffersPerEngine: number;
  heapPerEngine: number;
}

function measure(router: RouterPolicy, engines: number): Row {
  const before = memory();
  const f = new Fleet({ trace, engines, router, numBlocks: BLOCKS });
  try {
    const built = memory();
    const t = performance.now();
    const r = f.run();
    const seconds = (performance.now() - t) / 1000;
    const per = (a: number, b: number) => (a - b) / engines / MB;
    return {
      router, engines, seconds, hitRate: r.hitRate,
      rssPerEngine: per(built.rss, before.rss), buffersPerEngine: per(built.buffers, before.buffers), heapPerEngine: per(built.heap, before.heap),
    };
  } finally {
    f.dispose();
  }
}

phase(`fleet: ${TRACE}, 1 engine then ${ENGINES} engines of ${BLOCKS} blocks, routers ${ROUTERS.join(', ')}`, '~1-3 min');
const rows: Row[] = [measure('round-robin', 1)];
for (const router of ROUTERS) {
  phase(`  ${ENGINES} engines, ${router}`);
  rows.push(measure(router, ENGINES));
}
console.log(`\nfleet on ${TRACE}: ${BLOCKS} blocks per engine (memory measured across building the engines, per engine)\n`);
console.log('| router | engines | run s | hit rate | RSS MB / engine | array buffers MB / engine | JS heap MB / engine |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) {
  console.log(`| ${r.router} | ${r.engines} | ${r.seconds.toFixed(2)} | ${(r.hitRate * 100).toFixed(2)} % | ${r.rssPerEngine.toFixed(2)} | ${r.buffersPerEngine.toFixed(2)} | ${r.heapPerEngine.toFixed(3)} |`);
}
