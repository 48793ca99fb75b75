// npm run bench:builds -- a.wasm b.wasm [...]: core builds side by side in one
// process. On this shared machine the speed of the same binary swings by
// 1.5x within minutes, so two builds are only comparable when their rounds
// alternate. Each build gets its own instance and manager, driven through
// the raw exports (no bindings, which hold one instance per process); a round
// is the replay's core cycle: allocate K blocks (evicting K), insert K fresh
// blocks, release them.
//
//   N=65536 K=750 ROUNDS=3000 npm run bench:builds -- build/kvpool.wasm /tmp/old.wasm

import { readFileSync } from 'node:fs';

interface CoreRaw {
  memory: WebAssembly.Memory;
  alloc(bytes: number): number;
  mgr_create(numBlocks: number, blockSize: number, prefixOn: number, seedLo: number, seedHi: number): number;
  mgr_allocate(m: number, n: number, out: number): number;
  mgr_insert(m: number, tokens: number, ids: number, n: number, parentId: number, parentPtr: number): number;
  mgr_release(m: number, ids: number, n: number): number;
}

const env = (k: string, d: number) => Number(process.env[k] ?? d);
const N = env('N', 65536);
const K = env('K', 750);
const ROUNDS = env('ROUNDS', 3000);
const WARMUP = Math.min(200, ROUNDS >> 2);
const B = 16;
const files = process.argv.slice(2).filter((a) => a !== '--');
if (files.length === 0) {
  console.error('usage: npm run bench:builds -- <build.wasm> [<build.wasm> ...]');
  process.exit(1);
}

const subjects = files.map((file) => {
  const e = new WebAssembly.Instance(new WebAssembly.Module(readFileSync(file)), {}).exports as unknown as CoreRaw;
  const m = e.mgr_create(N, B, 1, 1024, 0);
  if (m === 0) throw new Error(`${file}: could not create a manager of ${N} blocks`);
  return { file, e, m, tokens: e.alloc(16 + K * B * 4) + 16, ids: e.alloc(K * 4), next: 1, ms: [[], [], []] as number[][] };
});

for (let r = 0; r < ROUNDS; r++) {
  for (const s of subjects) {
    const i32 = new Int32Array(s.e.memory.buffer);
    for (let i = 0, p = s.tokens >> 2; i < K * B; i++) i32[p + i] = s.next++;
    const t0 = performance.now();
    if (s.e.mgr_allocate(s.m, K, s.ids) !== K) throw new Error(`${s.file}: allocate failed`);
    const t1 = performance.now();
    if (s.e.mgr_insert(s.m, s.tokens, s.ids, K, 0, 0) < 0) throw new Error(`${s.file}: insert failed`);
    const t2 = performance.now();
    if (s.e.mgr_release(s.m, s.ids, K) !== 0) throw new Error(`${s.file}: release failed`);
    const t3 = performance.now();
    if (r >= WARMUP) {
      s.ms[0]!.push(t1 - t0);
      s.ms[1]!.push(t2 - t1);
      s.ms[2]!.push(t3 - t2);
    }
  }
}

// Medians of the per-round times: a round that another process on this
// shared machine slowed down moves a sum, not a median.
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const per = (ms: number) => ((ms * 1e6) / K).toFixed(1);
console.log(`ns per block (median round), ${N} blocks, ${K} per round, ${ROUNDS - WARMUP} timed rounds, builds alternating`);
console.log('| build | allocate (evicting) | insert | release | total |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const s of subjects) {
  const [a, i, r] = s.ms.map(median) as [number, number, number];
  console.log(`| ${s.file} | ${per(a)} | ${per(i)} | ${per(r)} | ${per(a + i + r)} |`);
}
