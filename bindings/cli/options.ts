// The replay options of `kvpool replay` and `kvpool sweep`, defined once:
// replay takes one value each, sweep a comma-separated list of values for
// the options that can span a grid. Each flag's camelCase name is the
// `replay()` option of the same name.

import { Command, InvalidArgumentError, Option } from 'commander';
import { EVICTION_POLICIES, type EvictionPolicy } from '../managers/eviction-policy.js';
import { didYouMean } from './did-you-mean.js';

/** A commander parser for a number of seconds >= 0. */
export function seconds(name: string): (v: string) => number {
  return (v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`${name} must be a number of seconds >= 0, got ${JSON.stringify(v)}`);
    return n;
  };
}

/** A commander parser for a number > 0. */
export function positiveNumber(name: string): (v: string) => number {
  return (v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a number > 0, got ${JSON.stringify(v)}`);
    return n;
  };
}

/** A commander parser for a number >= 0. */
export function nonNegativeNumber(name: string): (v: string) => number {
  return (v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`${name} must be a number >= 0, got ${JSON.stringify(v)}`);
    return n;
  };
}

export function parseIntArg(name: string, min: number, value: string): number {
  const n = Number(value);
  if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) {
    throw new InvalidArgumentError(`${name} must be an integer, got ${JSON.stringify(value)}`);
  }
  if (n < min) throw new InvalidArgumentError(`${name} must be >= ${min}, got ${n}`);
  return n;
}

function list(value: string): string[] {
  return value.split(',').map((x) => x.trim());
}

/** Parses "1,4,128" into ratios >= 1. */
export function parseRatios(name: string, value: string): number[] {
  return list(value).map((x) => {
    const n = Number(x);
    if (!/^\d+$/.test(x) || !Number.isSafeInteger(n) || n < 1) {
      throw new InvalidArgumentError(`${name} must be a comma-separated list of integers >= 1, got ${JSON.stringify(value)}`);
    }
    return n;
  });
}

function parseEviction(name: string, value: string): EvictionPolicy {
  if (!(EVICTION_POLICIES as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`${name} must be one of ${EVICTION_POLICIES.join(', ')}, got ${JSON.stringify(value)}${didYouMean(value, EVICTION_POLICIES)}`);
  }
  return value as EvictionPolicy;
}

interface IntSpec {
  flag: string;
  key: 'blockSize' | 'numBlocks' | 'dpSize' | 'maxRunning' | 'seed' | 'hostBlocks' | 'storeBlocks' | 'slidingWindow' | 'linearStateSlots';
  min: number;
  desc: string;
  def?: number;
}

/** Integer options a sweep can vary. */
export const GRID_INT_OPTIONS: readonly IntSpec[] = [
  { flag: '--block-size', key: 'blockSize', min: 1, def: 16, desc: 'tokens per KV block' },
  { flag: '--num-blocks', key: 'numBlocks', min: 2, def: 65536, desc: 'physical blocks per dp rank, padding included' },
  { flag: '--dp-size', key: 'dpSize', min: 1, def: 1, desc: 'data-parallel ranks, each with --num-blocks blocks (a new request goes to the rank with the most free blocks)' },
  { flag: '--max-running', key: 'maxRunning', min: 1, def: 32, desc: 'sequences held at once' },
  { flag: '--seed', key: 'seed', min: 0, def: 1024, desc: 'XXH3 seed of the block hash chain (and of the built-in workload)' },
  { flag: '--host-blocks', key: 'hostBlocks', min: 0, desc: 'host-tier blocks per dp rank (offload on finish, load on host hits; 0: none)' },
  { flag: '--store-blocks', key: 'storeBlocks', min: 1, desc: 'with --host-blocks: a KV-cache store of n blocks behind the host tier (written by offloads, read by prefetches)' },
  { flag: '--sliding-window', key: 'slidingWindow', min: 1, desc: 'replay on a composite pool: a sliding window of n tokens plus full sub-managers (no prefix cache)' },
  { flag: '--linear-state-slots', key: 'linearStateSlots', min: 2, desc: 'replay with linear state: checkpoint slots per dp rank, padding included (combines with --host-blocks and --sliding-window)' },
];

const EVICTION_DESC = 'eviction policy of the prefix cache: lru (the reference), lfu, or priority (generated tokens first)';

/** Adds the options both commands share, one value each (`grid`: false) or lists (`grid`: true). */
export function addReplayOptions(cmd: Command, grid: boolean): Command {
  cmd.option('--trace <file>', 'trace: a .jsonl or .jsonl.gz file, - for stdin, or a built-in name (mooncake-conversation); default: the built-in generated workload');
  for (const s of GRID_INT_OPTIONS) {
    const arg = grid ? `<list>` : '<n>';
    const parse = grid ? (v: string) => list(v).map((x) => parseIntArg(s.flag, s.min, x)) : (v: string) => parseIntArg(s.flag, s.min, v);
    const desc = grid ? `${s.desc}; a comma-separated list sweeps over each value` : s.desc;
    const opt = new Option(`${s.flag} ${arg}`, desc).argParser(parse as (v: string) => unknown);
    if (s.def !== undefined) opt.default(grid ? [s.def] : s.def, String(s.def));
    cmd.addOption(opt);
  }
  if (grid) {
    cmd.addOption(new Option('--eviction <list>', `${EVICTION_DESC}; a list sweeps over each`).argParser((v) => list(v).map((x) => parseEviction('--eviction', x))).default(['lru'], 'lru'));
  } else {
    cmd.addOption(new Option('--eviction <policy>', EVICTION_DESC).choices(EVICTION_POLICIES).default('lru'));
  }
  cmd
    .option('--compress-ratios <list>', 'with --sliding-window: one full sub-manager per ratio, e.g. 1,4 (default 1)', (v: string) => parseRatios('--compress-ratios', v))
    .option('--limit <n>', 'replay only the first n requests', (v: string) => parseIntArg('--limit', 0, v))
    .option('--requests <n>', 'requests of the built-in workload', (v: string) => parseIntArg('--requests', 0, v), 2000)
    .option('--publish-after-prefill', 'publish prompt blocks to the prefix cache while the sequence runs', false);
  return cmd;
}
