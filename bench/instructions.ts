// npm run bench:instructions -- <pkg> [<pkg> ...] [--modes plain,host-tier] [--limit 2000] [--cache] [--top 25]
//
// Machine instructions per function of one replay, counted by valgrind
// (callgrind): the same build and options give the same counts to a few
// parts in ten thousand, where the wall time of this shared machine moves
// by tens of percent from minute to minute. Each <pkg> is a built package
// (as for bench:replays; `npm run bench:replays -- --snapshot <dir>` keeps
// one). Node runs with its Wasm tiers fixed (TurboFan only, no tier-up)
// and V8's predictable mode, and the replay between two garbage
// collections (bench/instructions-child.mjs); V8's perf map names the
// code, and the core's function names come from the package's .wat.
// `--cache` also simulates a 32 KB first-level and a 16 MB last-level data
// cache and counts their read misses per function: where a build loses
// time to memory rather than to instructions. Under valgrind a replay runs
// ~100x slower: the first 2,000 requests take about a minute per run.
// Needs valgrind (Debian: apt-get install valgrind).

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { REPLAY_MODES } from './replay-modes.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const program = new Command('bench:instructions')
  .argument('<pkg...>', 'directories holding a built package (. is this checkout)')
  .option('--modes <list>', 'modes to replay, comma-separated', 'plain,host-tier')
  .option('--limit <n>', 'replay the first n requests', '2000')
  .option('--trace <name>', 'trace file or built-in name', 'mooncake-conversation')
  .option('--cache', 'simulate the data caches and count read misses too')
  .option('--top <n>', 'functions listed', '25')
  .parse();
const opts = program.opts<{ modes: string; limit: string; trace: string; cache?: boolean; top: string }>();
const pkgs = program.args.map((p) => resolve(p));
for (const p of pkgs) if (!existsSync(join(p, 'dist/index.node.js'))) program.error(`${p}: no dist/index.node.js (build it, or make a snapshot)`);
const modes = opts.modes.split(',');
for (const m of modes) if (!(m in REPLAY_MODES)) program.error(`unknown mode ${m} (${Object.keys(REPLAY_MODES).join(', ')})`);
if (spawnSync('valgrind', ['--version']).status !== 0) program.error('valgrind is not installed (Debian: apt-get install valgrind)');

/** Counts per event (Ir, and with --cache D1mr, DLmr, ...) per function name. */
type Counts = Map<string, Map<string, number>>;

/** The core's function names by index: imports first, then functions, as in the module. */
function wasmNames(pkg: string): string[] {
  const wat = join(pkg, 'build/kvpool.wat');
  if (!existsSync(wat)) return [];
  const names: string[] = [];
  for (const m of readFileSync(wat, 'utf8').matchAll(/^\s*\((?:func|import)\s+(?:"[^"]*"\s+"[^"]*"\s+\(func\s+)?(\$\S+)/gm)) names.push(m[1]!.replace(/^\$assembly\//, ''));
  return names;
}

/** Code ranges from V8's perf map ("start size name", hex), sorted by start. */
function perfMap(file: string): Array<[number, number, string]> {
  const out: Array<[number, number, string]> = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const a = line.indexOf(' ');
    const b = line.indexOf(' ', a + 1);
    if (a < 0 || b < 0) continue;
    out.push([parseInt(line.slice(0, a), 16), parseInt(line.slice(a + 1, b), 16), line.slice(b + 1)]);
  }
  return out.sort((x, y) => x[0] - y[0]);
}

/** Self cost per instruction address from a callgrind file written with --dump-instr=yes. */
function costsByAddress(file: string): { events: string[]; cost: Map<number, number[]> } {
  let events: string[] = [];
  const cost = new Map<number, number[]>();
  let addr = 0;
  let afterCall = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('events:')) {
      events = line.slice(7).trim().split(/\s+/);
      continue;
    }
    if (line.startsWith('calls=')) {
      afterCall = true; // the next line holds the call's inclusive cost: its position counts, its cost is the callee's
      continue;
    }
    const c = line[0];
    if (c === undefined || !(c === '+' || c === '*' || c === '0' || (c === '-' && /^-\d/.test(line)) || (c >= '1' && c <= '9'))) continue;
    const fields = line.split(' ');
    const p = fields[0]!;
    addr = p === '*' ? addr : p.startsWith('+') ? addr + Number(p.slice(1)) : p.startsWith('-') ? addr - Number(p.slice(1)) : Number(p);
    if (afterCall) {
      afterCall = false;
      continue;
    }
    let v = cost.get(addr);
    if (v === undefined) cost.set(addr, (v = new Array<number>(events.length).fill(0)));
    for (let i = 2; i < fields.length; i++) v[i - 2]! += Number(fields[i]);
  }
  return { events, cost };
}

function run(pkg: string, mode: string, dir: string): Counts {
  const out = join(dir, `callgrind.${Math.random().toString(36).slice(2)}`);
  const valgrind = ['--tool=callgrind', '--dump-instr=yes', '--smc-check=all-non-file', `--callgrind-out-file=${out}`];
  if (opts.cache) valgrind.push('--cache-sim=yes', '--I1=32768,8,64', '--D1=32768,8,64', '--LL=16777216,16,64');
  const node = ['--perf-basic-prof', '--expose-gc', '--predictable', '--no-liftoff', '--no-wasm-tier-up'];
  const options = JSON.stringify({ trace: opts.trace, limit: Number(opts.limit), ...REPLAY_MODES[mode]! });
  const r = spawnSync('valgrind', [...valgrind, process.execPath, ...node, join(root, 'bench/instructions-child.mjs'), pkg, options], { encoding: 'utf8', maxBuffer: 1 << 26 });
  const map = `/tmp/perf-${r.pid}.map`;
  if (r.status !== 0 || !existsSync(out) || !existsSync(map)) throw new Error(`valgrind run of ${pkg} (${mode}) failed (${r.status}):\n${r.stderr.slice(-2000)}`);
  const { events, cost } = costsByAddress(out);
  const ranges = perfMap(map);
  rmSync(out);
  rmSync(map);
  const names = wasmNames(pkg);
  const counts: Counts = new Map();
  const starts = ranges.map((x) => x[0]);
  const add = (name: string, v: number[]) => {
    let m = counts.get(name);
    if (m === undefined) counts.set(name, (m = new Map()));
    events.forEach((e, i) => m!.set(e, (m!.get(e) ?? 0) + v[i]!));
  };
  for (const [a, v] of cost) {
    // The last range starting at or before a (binary search).
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= a) lo = mid;
      else hi = mid - 1;
    }
    const rg = ranges[lo];
    let name = rg !== undefined && rg[0] <= a && a < rg[0] + rg[1] ? rg[2] : '(Node and V8: startup, parsing, the runtime)';
    const w = /wasm-function\[(\d+)\]/.exec(name);
    if (w !== null) name = `core: ${names[Number(w[1])] ?? `function ${w[1]}`}`;
    else name = name.replace(/^JS:[*^~]?/, 'js: ').replace(/ file:\/\/\S*\/(dist\/\S+)$/, ' $1');
    add(name, v);
    add('all (the process)', v);
    if (name.startsWith('core: ')) add('all of the core', v);
  }
  return counts;
}

const dir = mkdtempSync(join(tmpdir(), 'kvpool-instructions-'));
const columns: Array<{ label: string; counts: Counts }> = [];
try {
  for (const mode of modes) {
    for (const pkg of pkgs) {
      process.stderr.write(`${mode} ${pkg}: under valgrind...\n`);
      columns.push({ label: `${pkgs.length > 1 ? `${pkg} ` : ''}${mode}`, counts: run(pkg, mode, dir) });
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const events = opts.cache ? ['Ir', 'D1mr', 'DLmr'] : ['Ir'];
const eventName: Record<string, string> = { Ir: 'instructions', D1mr: 'first-level read misses', DLmr: 'last-level read misses' };
// The functions with the most instructions in any column.
const most = (n: string) => Math.max(...columns.map((c) => c.counts.get(n)?.get('Ir') ?? 0));
const rows = [...new Set(columns.flatMap((c) => [...c.counts.keys()]))]
  .filter((n) => !n.startsWith('all '))
  .sort((a, b) => most(b) - most(a))
  .slice(0, Number(opts.top));
const fmt = (v: number | undefined) => (v === undefined ? '' : `${(v / 1e6).toFixed(v < 1e7 ? 2 : 1)} M`);
for (const e of events) {
  console.log(`\n${eventName[e]} per replay of the first ${opts.limit} requests (${opts.trace}), millions; valgrind callgrind${opts.cache ? ', caches simulated' : ''}\n`);
  console.log(`| function | ${columns.map((c) => c.label).join(' | ')} |`);
  console.log(`| --- |${columns.map(() => ' ---: |').join('')}`);
  for (const n of ['all (the process)', 'all of the core', ...rows]) console.log(`| ${n} | ${columns.map((c) => fmt(c.counts.get(n)?.get(e))).join(' | ')} |`);
}
