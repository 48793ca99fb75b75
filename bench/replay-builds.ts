// npm run bench:replays -- <pkg> [<pkg> ...] [--modes plain,lfu,...] [--rounds 5] [--limit n]
//
// Whole builds of the package side by side on the replay of the Mooncake
// conversation trace: each <pkg> is a directory holding a built package
// (dist/, build/*.wasm, traces/; `--snapshot <dir>` copies this checkout's
// build there first, so an old build can be kept before a change). Every
// replay runs in a fresh process (bench/replay-child.mjs: the package's
// replaySync, as the CLI runs it), the builds and modes taking turns round
// after round, so a slow phase of this shared machine hits all of them
// alike. Each run's loop time (wall, trace parsing excluded) and CPU time
// are collected; the tables give medians and ratios against the first
// build, and, per build, every mode against its plain replay. A build whose
// results (ids, hits, evictions, checksums, every figure but the timings)
// differ from the first build's for a mode is an error: a speed-up must not
// change what the replay does.
//
//   npm run build && npm run bench:replays -- --snapshot /tmp/kv-before
//   ... change, rebuild ...
//   npm run bench:replays -- /tmp/kv-before . --rounds 5
//
// `--warm` runs every replay in this one process instead (each build loaded
// once, the trace parsed once): warm code and memory, the steady state of
// a sweep or a simulator that replays again and again, where a fresh
// process also pays for compiling and first-touching its memory. The first
// round only warms up and is left out; the order of the builds alternates
// from round to round.

import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Command } from 'commander';
import { REPLAY_MODES } from './replay-modes.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const program = new Command('bench:replays')
  .argument('[pkg...]', 'directories holding a built package (. is this checkout)')
  .option('--modes <list>', 'modes to replay, comma-separated', 'plain')
  .option('--rounds <n>', 'rounds (each build and mode once per round)', '3')
  .option('--limit <n>', 'replay only the first n requests')
  .option('--trace <name>', 'trace file or built-in name', 'mooncake-conversation')
  .option('--snapshot <dir>', "copy this checkout's built package to <dir> and exit")
  .option('--warm', 'every replay in this process (a first round to warm up, left out)')
  .parse();
const opts = program.opts<{ modes: string; rounds: string; limit?: string; trace: string; snapshot?: string; warm?: boolean }>();

if (opts.snapshot !== undefined) {
  const dir = resolve(opts.snapshot);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const p of ['dist', 'build', 'traces', 'package.json']) cpSync(join(root, p), join(dir, p), { recursive: true });
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  console.log(`snapshot of ${root} in ${dir}`);
  process.exit(0);
}

const pkgs = program.args.map((p) => resolve(p));
if (pkgs.length === 0) program.error('give at least one package directory');
for (const p of pkgs) if (!existsSync(join(p, 'dist/index.node.js'))) program.error(`${p}: no dist/index.node.js (build it, or make a --snapshot)`);
const modes = opts.modes.split(',');
for (const m of modes) if (!(m in REPLAY_MODES)) program.error(`unknown mode ${m} (${Object.keys(REPLAY_MODES).join(', ')})`);
const rounds = Number(opts.rounds);

type Result = Record<string, unknown> & { seconds: number; cpuSeconds: number };
const child = join(root, 'bench/replay-child.mjs');

const options = (mode: string) => ({ ...REPLAY_MODES[mode]!, ...(opts.limit === undefined ? {} : { limit: Number(opts.limit) }) });

function run(pkg: string, mode: string): Result {
  return JSON.parse(execFileSync(process.execPath, [child, pkg, JSON.stringify({ trace: opts.trace, ...options(mode) })], { encoding: 'utf8', maxBuffer: 1 << 26 })) as Result;
}

interface Loaded {
  replaySync(o: Record<string, unknown>): Record<string, unknown> & { seconds: number };
  readTraceFile(name: string, o: { limit?: number }): Promise<unknown>;
}

/** --warm: each build's package loaded in this process, and the trace parsed once for all of them. */
const loaded = new Map<string, Loaded>();
let warmTrace: unknown = null;
if (opts.warm) {
  for (const p of pkgs) loaded.set(p, (await import(pathToFileURL(join(p, 'dist/index.node.js')).href)) as Loaded);
  warmTrace = await loaded.get(pkgs[0]!)!.readTraceFile(opts.trace, opts.limit === undefined ? {} : { limit: Number(opts.limit) });
}

function runWarm(pkg: string, mode: string): Result {
  const c0 = process.cpuUsage();
  const r = loaded.get(pkg)!.replaySync({ ...options(mode), trace: warmTrace });
  const c = process.cpuUsage(c0);
  return { ...r, cpuSeconds: (c.user + c.system) / 1e6 };
}

/** The result without its timings (what must not change between builds). */
function figures(r: Result): string {
  const { seconds: _s, cpuSeconds: _c, allocateCallsPerSecond: _a, config: _cfg, ...rest } = r;
  return JSON.stringify(rest);
}

const times = new Map<string, number[]>();
const cpu = new Map<string, number[]>();
const reference = new Map<string, string>();
const key = (pkg: string, mode: string) => `${pkg}\0${mode}`;
const warmUp = opts.warm ? 1 : 0;
for (let r = 0; r < rounds + warmUp; r++) {
  for (const mode of modes) {
    for (const pkg of r % 2 === 1 && opts.warm ? [...pkgs].reverse() : pkgs) {
      const res = opts.warm ? runWarm(pkg, mode) : run(pkg, mode);
      const f = figures(res);
      const ref = reference.get(mode);
      if (ref === undefined) reference.set(mode, f);
      else if (ref !== f) throw new Error(`${pkg}, mode ${mode}: the results differ from ${pkgs[0]}'s\n${f}\n${ref}`);
      process.stderr.write(`${r < warmUp ? 'warm-up' : `round ${r + 1 - warmUp}/${rounds}`} ${mode} ${pkg}: ${res.seconds.toFixed(3)} s (cpu ${res.cpuSeconds.toFixed(3)} s)\n`);
      if (r < warmUp) continue;
      const k = key(pkg, mode);
      times.set(k, [...(times.get(k) ?? []), res.seconds]);
      cpu.set(k, [...(cpu.get(k) ?? []), res.cpuSeconds]);
    }
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const name = (p: string) => (p === root ? '.' : p);

/**
 * The median of each round's own ratio a / b, and in how many rounds b was
 * faster: the two runs of a round are minutes apart at most, so this
 * statistic cancels the machine's drift, which moves a build by up to 1.5x
 * between rounds here, more than most changes measured.
 */
function paired(data: Map<string, number[]>, a: string, b: string, mode: string): string {
  const xs = data.get(key(a, mode))!;
  const ys = data.get(key(b, mode))!;
  const ratios = xs.map((x, i) => x / ys[i]!);
  return `paired ${median(ratios).toFixed(2)}x, ${ratios.filter((r) => r > 1).length}/${ratios.length}`;
}

function tables(what: string, data: Map<string, number[]>): void {
  const med = (pkg: string, mode: string) => median(data.get(key(pkg, mode))!);
  console.log(`${what}, median of ${rounds} runs each ${opts.warm ? 'in this one process, after a round to warm up' : 'in a fresh process'}, builds and modes taking turns; results identical across builds`);
  if (pkgs.length > 1) console.log('(in brackets: the median of the rounds\' own ratios, and the rounds the later build was faster in)');
  console.log();
  console.log(`| mode | ${pkgs.map(name).join(' | ')} |${pkgs.length > 1 ? ` ${pkgs.slice(1).map((p) => `${name(pkgs[0]!)} / ${name(p)}`).join(' | ')} |` : ''}`);
  console.log(`| --- |${pkgs.map(() => ' ---: |').join('')}${pkgs.slice(1).map(() => ' ---: |').join('')}`);
  for (const mode of modes) {
    const base = med(pkgs[0]!, mode);
    const cells = pkgs.map((p) => `${med(p, mode).toFixed(3)} s`);
    const ratios = pkgs.slice(1).map((p) => `${(base / med(p, mode)).toFixed(2)}x (${paired(data, pkgs[0]!, p, mode)})`);
    console.log(`| ${mode} | ${[...cells, ...ratios].join(' | ')} |`);
  }
  if (modes.includes('plain') && modes.length > 1) {
    console.log();
    console.log(`| mode | ${pkgs.map((p) => `${name(p)}: vs plain`).join(' | ')} |`);
    console.log(`| --- |${pkgs.map(() => ' ---: |').join('')}`);
    for (const mode of modes) console.log(`| ${mode} | ${pkgs.map((p) => `${(med(p, mode) / med(p, 'plain')).toFixed(2)}x`).join(' | ')} |`);
  }
  console.log();
}

tables('loop seconds (wall)', times);
tables('CPU seconds of the replay', cpu);
