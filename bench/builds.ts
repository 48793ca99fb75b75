// npm run bench:builds -- a.wasm b.wasm [...]: core builds side by side in one
// process. On this shared machine the speed of the same binary swings by
// 1.5x within minutes, so two builds are only comparable when their rounds
// alternate. Each build gets its own instance and manager, driven through
// the raw exports (no bindings, which hold one instance per process); a round
// is the replay's core cycle (bench/core-cycle.ts): allocate K blocks
// (evicting K), insert K fresh blocks, release them.
//
//   N=65536 K=750 ROUNDS=3000 npm run bench:builds -- build/kvpool.wasm /tmp/old.wasm

import { CycleSubject, median } from './core-cycle.js';

const env = (k: string, d: number) => Number(process.env[k] ?? d);
const N = env('N', 65536);
const K = env('K', 750);
const ROUNDS = env('ROUNDS', 3000);
const WARMUP = Math.min(200, ROUNDS >> 2);
const files = process.argv.slice(2).filter((a) => a !== '--');
if (files.length === 0) {
  console.error('usage: npm run bench:builds -- <build.wasm> [<build.wasm> ...]');
  process.exit(1);
}

const subjects = files.map((file) => new CycleSubject(file, N, K));
for (let r = 0; r < ROUNDS; r++) for (const s of subjects) s.round(r >= WARMUP);

// Medians of the per-round times: a round that another process on this
// shared machine slowed down moves a sum, not a median.
console.log(`ns per block (median round), ${N} blocks, ${K} per round, ${ROUNDS - WARMUP} timed rounds, builds alternating`);
console.log('| build | allocate (evicting) | insert | release | total |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const s of subjects) {
  const [a, i, r] = s.ns.map(median) as [number, number, number];
  console.log(`| ${s.file} | ${a.toFixed(1)} | ${i.toFixed(1)} | ${r.toFixed(1)} | ${(a + i + r).toFixed(1)} |`);
}
