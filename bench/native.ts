// npm run bench:native: how much of the core's time is WebAssembly's. The
// release core (build/kvpool.wasm) is compiled to C by wasm2c and then by
// gcc -O3 (bench/native/core-cycle.c drives it), and the same measurements
// run under Node on the same .wasm, their runs taking turns:
//
// - the replay's core cycle of bench/builds.ts (allocate K blocks evicting
//   K, insert K fresh blocks, release them), ns per block of each phase;
// - per-block XXH3 (the chained hash of NB blocks of 16 tokens, latency
//   bound): Node, wasm2c native, and the xxHash C library when its header is
//   installed (the library's hashes are checked equal to the core's).
//
// Same code, two compilers: the ratio Node / native is what running as Wasm
// costs this design; what native still spends is the design's. Needs
// wasm2c (the npm package wabt, a devDependency; WASM2C=path picks another),
// WASM2C_RUNTIME=dir: the wasm2c/ folder of a wabt 1.0.39 source tree (the
// runtime the generated C compiles against; the npm package does not ship it
// and kvpool does not carry a copy of third-party code), a C compiler (CC, default gcc) and SIMDe's headers for the
// core's SIMD (Debian: libsimde-dev); the xxHash library's header is
// optional (libxxhash-dev). A machine without them skips the bench with a
// message: nothing else needs them.
//
//   npm run bench:native [-- --reps 3]
//   N=65536 K=750 ROUNDS=3000 NB=4096 HASH_ROUNDS=2000 npm run bench:native

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { CYCLE_BLOCK_SIZE, CycleSubject, median } from './core-cycle.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const opts = new Command('bench:native').option('--reps <n>', 'native and Node runs, taking turns', '3').parse().opts<{ reps: string }>();
const env = (k: string, d: number) => Number(process.env[k] ?? d);
const N = env('N', 65536);
const K = env('K', 750);
const ROUNDS = env('ROUNDS', 3000);
const NB = env('NB', 4096);
const HASH_ROUNDS = env('HASH_ROUNDS', 2000);
const REPS = Number(opts.reps);
const wasm = join(root, 'build/kvpool.wasm');

function which(cmd: string): string | null {
  const r = spawnSync('sh', ['-c', `command -v "${cmd}"`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

function skip(why: string): never {
  console.log(`bench:native skipped: ${why}`);
  process.exit(0);
}

// ---- the native build ----

// wasm2c: the npm package wabt's (a devDependency); the runtime must be of the same version.
const local = join(root, 'node_modules/.bin/wasm2c');
const wasm2c = process.env['WASM2C'] ?? (existsSync(local) ? local : which('wasm2c'));
const cc = process.env['CC'] ?? 'gcc';
if (wasm2c === null) skip('wasm2c not found (npm ci installs the wabt package; or set WASM2C to its path)');
if (which(cc) === null) skip(`no C compiler (${cc}; set CC)`);
if (!existsSync(wasm)) skip('build/kvpool.wasm is missing (npm run build:wasm)');
const runtime = process.env['WASM2C_RUNTIME'];
if (runtime === undefined || !existsSync(join(runtime, 'wasm-rt.h'))) {
  skip('set WASM2C_RUNTIME to the wasm2c/ folder of a wabt 1.0.39 source tree (its wasm-rt.h and wasm-rt-impl.c; the npm package wabt ships the converter only)');
}
const xxhash = ['/usr/include/xxhash.h', '/usr/local/include/xxhash.h'].some(existsSync);

const dir = mkdtempSync(join(tmpdir(), 'kvpool-native-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const converted = spawnSync(wasm2c, [wasm, '-n', 'kvpool', '-o', join(dir, 'kvpool.c')], { encoding: 'utf8' });
if (converted.status !== 0) skip(`wasm2c could not convert the core (its SIMD needs wabt >= 1.0.33): ${converted.stderr.trim() || `exit ${converted.status ?? converted.signal}`}`);
const sources = ['wasm-rt-impl.c', 'wasm-rt-mem-impl.c'].map((f) => join(runtime, f)).filter(existsSync);
const exe = join(dir, 'core-cycle');
const cflags = ['-O3', '-march=native', '-I', dir, '-I', runtime, ...(xxhash ? ['-DWITH_XXHASH'] : [])];
const built = spawnSync(cc, [...cflags, '-o', exe, join(root, 'bench/native/core-cycle.c'), join(dir, 'kvpool.c'), ...sources, '-lm'], {
  encoding: 'utf8',
});
if (built.status !== 0) skip(`${cc} failed (wasm2c's SIMD needs SIMDe's headers: Debian libsimde-dev):\n${built.stderr.slice(0, 2000)}`);

// ---- runs, taking turns ----

interface NativeRun {
  cycle: { allocate: number; insert: number; release: number };
  hash: { wasm2c: number };
  xxhash?: { library: number; same: boolean };
}

function native(): NativeRun {
  const out = execFileSync(exe, [N, K, ROUNDS, NB, HASH_ROUNDS].map(String), { encoding: 'utf8' });
  const r = {} as Record<string, unknown>;
  for (const line of out.trim().split('\n')) {
    const { what, ...rest } = JSON.parse(line) as { what: string };
    r[what] = rest;
  }
  return r as unknown as NativeRun;
}

function node(): { cycle: [number, number, number]; hash: number } {
  const s = new CycleSubject(wasm, N, K);
  const warmup = Math.min(200, ROUNDS >> 2);
  for (let r = 0; r < ROUNDS; r++) s.round(r >= warmup);
  const e = s.e;
  const tok = e.alloc(16 + NB * CYCLE_BLOCK_SIZE * 4) + 16;
  const out = e.alloc(NB * 16);
  const i32 = new Int32Array(e.memory.buffer);
  for (let i = 0; i < NB * CYCLE_BLOCK_SIZE; i++) i32[(tok >> 2) + i] = Math.imul(i, 2654435761 | 0);
  const hs: number[] = [];
  for (let r = 0; r < HASH_ROUNDS; r++) {
    const t0 = performance.now();
    e.hash_blocks(tok, NB * CYCLE_BLOCK_SIZE, CYCLE_BLOCK_SIZE, 1024, 0, out);
    hs.push(((performance.now() - t0) * 1e6) / NB);
  }
  return { cycle: s.ns.map(median) as [number, number, number], hash: median(hs) };
}

const natives: NativeRun[] = [];
const nodes: Array<ReturnType<typeof node>> = [];
for (let r = 0; r < REPS; r++) {
  natives.push(native());
  nodes.push(node());
  process.stderr.write(`rep ${r + 1}/${REPS} done\n`);
}
if (natives.some((n) => n.xxhash?.same === false)) throw new Error('the xxHash library and the core disagree on a block hash');

const med = (xs: number[]) => median(xs);
const phases = ['allocate', 'insert', 'release'] as const;
const nodeCycle = phases.map((_, i) => med(nodes.map((n) => n.cycle[i]!)));
const nativeCycle = phases.map((p) => med(natives.map((n) => n.cycle[p])));
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const row = (what: string, a: number, b: number) => `| ${what} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(a / b).toFixed(2)}x |`;

console.log(`ns per block, median of ${REPS} runs each (each the median round), native and Node taking turns`);
console.log(`core cycle: ${N} blocks, ${K} per round, ${ROUNDS} rounds; native: wasm2c + ${cc} ${cflags.filter((f) => f.startsWith('-O') || f.startsWith('-m')).join(' ')}`);
console.log();
console.log('| core cycle | Node (Wasm) | native (wasm2c) | Node / native |');
console.log('| --- | ---: | ---: | ---: |');
phases.forEach((p, i) => console.log(row(p === 'allocate' ? 'allocate (evicting)' : p, nodeCycle[i]!, nativeCycle[i]!)));
console.log(row('total', sum(nodeCycle), sum(nativeCycle)));
console.log();
const hNode = med(nodes.map((n) => n.hash));
const hNative = med(natives.map((n) => n.hash.wasm2c));
console.log(`| XXH3-128 per chained block (${NB} blocks of ${CYCLE_BLOCK_SIZE} tokens) | ns | vs the C library |`);
console.log('| --- | ---: | ---: |');
const lib = xxhash ? med(natives.map((n) => n.xxhash!.library)) : null;
const vs = (x: number) => (lib === null ? '' : `${(x / lib).toFixed(2)}x`);
console.log(`| Node (Wasm) | ${hNode.toFixed(2)} | ${vs(hNode)} |`);
console.log(`| native (wasm2c) | ${hNative.toFixed(2)} | ${vs(hNative)} |`);
console.log(lib === null ? '| xxHash C library | not measured (no xxhash.h) | |' : `| xxHash C library (XXH3_128bits_withSeed, inlined) | ${lib.toFixed(2)} | 1.00x |`);
