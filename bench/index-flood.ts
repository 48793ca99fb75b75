// npm run bench (a part) / npm run bench:flood: KVEventIndex storing and
// removing 30,000 blocks whose hashes were crafted to share one home position
// under a fixed table hash (the worst case a stream could choose before the
// index's tables were keyed), side by side with 30,000 ordinary hashes, in
// alternating rounds. With keyed tables the two cost the same; the ratio is
// the figure (docs/events.md, limits).
//
//   npm run bench:flood [-- --rounds 5]

import { encode } from '@msgpack/msgpack';
import '../bindings/wasm-node.js';
import { KVEventIndex } from '../bindings/events/kv-event-index.js';
import { phase } from './progress.js';
import { median } from './median.js';

const arg = process.argv.indexOf('--rounds');
const ROUNDS = arg > 0 ? Number(process.argv[arg + 1]) : 5;
const N = 30_000;
const B = 16;
const PER_EVENT = 500;

/** lo ^ imul(hi, K) constant: one home for all under the old fixed mix, whatever the source. */
function crafted(n: number): bigint[] {
  const out: bigint[] = [];
  for (let i = 1; i <= n; i++) out.push((BigInt(i) << 32n) | BigInt((0x1234_5678 ^ Math.imul(i, 0x85ebca6b)) >>> 0));
  return out;
}

/** Distinct hashes from a fixed-seed LCG (what an engine's XXH3 or sha256 hashes look like to a table). */
function ordinary(n: number): bigint[] {
  let x = 0x9e3779b97f4a7c15n;
  const out: bigint[] = [];
  for (let i = 0; i < n; i++) {
    x = (x * 6364136223846793005n + 1442695040888963407n) & 0xffff_ffff_ffff_ffffn;
    out.push(x);
  }
  return out;
}

/** The stream: stored runs of PER_EVENT blocks (each block on the one before), then their removal. */
function stream(hashes: bigint[]): Uint8Array[] {
  const batches: Uint8Array[] = [];
  for (let i = 0; i < hashes.length; i += PER_EVENT) {
    const run = hashes.slice(i, i + PER_EVENT);
    const tokens = Array.from({ length: run.length * B }, (_, k) => (i * B + k) % 50_000);
    batches.push(encode([i, [{ type: 'BlockStored', block_hashes: run, parent_block_hash: i === 0 ? null : hashes[i - 1], token_ids: tokens, block_size: B, lora_id: null, medium: 'GPU', lora_name: null }], 0], { useBigInt64: true }));
  }
  for (let i = 0; i < hashes.length; i += PER_EVENT) {
    batches.push(encode([i, [{ type: 'BlockRemoved', block_hashes: hashes.slice(i, i + PER_EVENT), medium: 'GPU' }], 0], { useBigInt64: true }));
  }
  return batches;
}

const variants: Array<[string, Uint8Array[]]> = [
  ['ordinary hashes', stream(ordinary(N))],
  ['crafted colliding hashes', stream(crafted(N))],
];
const kb = (bs: Uint8Array[]) => bs.reduce((a, b) => a + b.length, 0) / 1024;
phase('KV-event index under a hash flood', `${ROUNDS} rounds of ${variants.length} streams of ${N} blocks, a few seconds`);
const times = variants.map(() => [] as number[]);
for (let r = 0; r < ROUNDS; r++) {
  variants.forEach(([, batches], i) => {
    const idx = new KVEventIndex({ blockSize: B });
    const t0 = performance.now();
    for (const b of batches) idx.applyBatch('engine', b);
    times[i]!.push(performance.now() - t0);
    if (idx.sourcesInfo()[0]?.blocks !== 0) throw new Error('the stream did not remove every block it stored');
  });
}
const base = median(times[0]!);
console.log(`\nKVEventIndex: store then remove ${N} blocks of ${B} tokens (${PER_EVENT} per event), median of ${ROUNDS} alternating rounds`);
console.log('| stream | events (KB) | ms | all rounds | / ordinary |');
console.log('| --- | ---: | ---: | --- | ---: |');
variants.forEach(([name, batches], i) => {
  const m = median(times[i]!);
  console.log(`| ${name} | ${kb(batches).toFixed(0)} | ${m.toFixed(0)} | ${times[i]!.map((t) => t.toFixed(0)).join(', ')} | ${(m / base).toFixed(2)}x |`);
});
