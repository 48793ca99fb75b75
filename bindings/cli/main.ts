#!/usr/bin/env node
// `kvpool replay [trace.jsonl]`: the replay kernel from the command line.

import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError, Option } from 'commander';
import cliProgress from 'cli-progress';
import '../wasm-node.js';
import { readTraceFile } from '../node/trace-file.js';
import { replaySync } from '../replay/replay.js';
import { eventFileSink } from '../node/event-file.js';
import { replayWithEvents } from '../replay/replay-events.js';
import type { ReplayResult } from '../replay/kernel.js';
import { formatSubManagers, ratiosOption } from './composite-format.js';
import type { HierarchyReplayResult } from '../replay/hierarchy-replay.js';
import { TraceError } from '../replay/trace.js';
import { EVICTION_POLICIES } from '../managers/eviction-policy.js';

function intOption(name: string, min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) {
      throw new InvalidArgumentError(`${name} must be an integer, got ${JSON.stringify(value)}`);
    }
    if (n < min) throw new InvalidArgumentError(`${name} must be >= ${min}, got ${n}`);
    return n;
  };
}

/** The result as an aligned two-column table. */
export function formatResult(r: ReplayResult | HierarchyReplayResult, title: string): string {
  const rows: Array<[string, string]> = [
    ['requests', String(r.requests)],
    ['rejected', String(r.rejected)],
    ['truncated', String(r.truncated)],
    ['prompt blocks', String(r.promptBlocks)],
    ['matched blocks', String(r.matchedBlocks)],
    ['hit rate', r.hitRate.toFixed(6)],
    ['evicted blocks', String(r.evictedBlocks)],
    ['allocated blocks', String(r.allocatedBlocks)],
    ['id checksum', String(r.idChecksum)],
    ['free blocks at end', String(r.freeBlocksAtEnd)],
    ['cached blocks at end', String(r.cachedBlocksAtEnd)],
    ['loop seconds', r.seconds.toFixed(3)],
    ['allocate calls / s', r.allocateCallsPerSecond.toLocaleString('en-US')],
  ];
  if (r.linearState) {
    const l = r.linearState;
    rows.push(
      ['checkpoint hits', String(l.checkpointHits)],
      ['checkpoints saved', String(l.checkpointsSaved)],
      ['checkpoint evictions', String(l.checkpointEvictions)],
      ['blocks trimmed (no checkpoint)', String(l.trimmedBlocks)],
    );
  }
  if ('hostTier' in r) {
    const h = r.hostTier;
    rows.push(
      ['host blocks', String(h.hostBlocks)],
      ['device hit blocks', String(h.deviceHitBlocks)],
      ['host hit blocks', String(h.hostHitBlocks)],
      ['blocks loaded', String(h.blocksLoaded)],
      ['blocks offloaded', String(h.blocksOffloaded)],
      ['host cached at end', String(h.hostCachedBlocksAtEnd)],
    );
  }
  const w = Math.max(...rows.map(([k]) => k.length));
  return [title, ...rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v}`), ...formatSubManagers(r)].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const program = new Command();
  program.name('kvpool').description('KV-cache block manager (xLLM BlockManagerPool semantics) with a WebAssembly core');
  program.exitOverride();
  program.configureOutput({ writeErr: (s) => process.stderr.write(s) });
  let code = 0;
  program
    .command('replay')
    .description('replay a Mooncake-style JSONL trace (or the built-in workload) through a BlockManagerPool')
    .argument('[trace]', 'JSONL trace file; without it, a built-in generated workload of multi-turn chats')
    .option('--block-size <n>', 'tokens per KV block', intOption('--block-size', 1), 16)
    .option('--num-blocks <n>', 'physical blocks per dp rank, padding included', intOption('--num-blocks', 2), 65536)
    .option('--max-running <n>', 'sequences held at once', intOption('--max-running', 1), 32)
    .option('--seed <n>', 'XXH3 seed of the block hash chain (and of the built-in workload)', intOption('--seed', 0), 1024)
    .option('--limit <n>', 'replay only the first N requests', intOption('--limit', 0))
    .option('--requests <n>', 'requests of the built-in workload', intOption('--requests', 0), 2000)
    .option('--host-blocks <n>', 'replay with a host tier of N blocks per dp rank (offload on finish, load on host hits)', intOption('--host-blocks', 2))
    .option('--publish-after-prefill', 'publish prompt blocks to the prefix cache while the sequence runs', false)
    .option('--sliding-window <n>', 'replay on a composite pool: a sliding window of n tokens plus full sub-managers (no prefix cache)', intOption('--sliding-window', 1))
    .option('--compress-ratios <list>', 'with --sliding-window: one full sub-manager per ratio, e.g. 1,4 (default 1)', ratiosOption('--compress-ratios'))
    .option('--linear-state-slots <n>', 'replay with linear state: checkpoint slots per dp rank, padding included', intOption('--linear-state-slots', 2))
    .addOption(new Option('--eviction <policy>', 'eviction policy of the prefix cache').choices(EVICTION_POLICIES).default('lru'))
    .option('--events <file>', 'write the KV-cache events as vLLM KVEventBatch msgpack, one batch per step')
    .option('--json', 'print the result object as JSON on stdout', false)
    .option('--no-progress', 'no progress bar')
    .action(async (trace: string | undefined, o) => {
      let requests;
      try {
        requests = trace ? await readTraceFile(trace, o.limit ?? Infinity) : undefined;
      } catch (e) {
        if (e instanceof TraceError) throw e;
        const err = e as NodeJS.ErrnoException;
        throw new Error(`cannot read trace ${JSON.stringify(trace)}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`);
      }
      const bar =
        o.progress && !o.json && process.stderr.isTTY
          ? new cliProgress.SingleBar(
              { format: 'replay [{bar}] {percentage}% | {value}/{total} requests | {duration}s', stream: process.stderr },
              cliProgress.Presets.shades_classic,
            )
          : null;
      let started = false;
      const sink = o.events ? eventFileSink(o.events) : null;
      const run = sink ? (opts: Parameters<typeof replaySync>[0]) => replayWithEvents(opts!, sink.write) : replaySync;
      let result: ReturnType<typeof replaySync>;
      try {
        result = run({
          trace: requests,
          blockSize: o.blockSize,
          numBlocks: o.numBlocks,
          maxRunning: o.maxRunning,
          seed: o.seed,
          limit: o.limit,
          workloadRequests: o.requests,
          publishAfterPrefill: o.publishAfterPrefill,
          slidingWindow: o.slidingWindow,
          compressRatios: o.compressRatios,
          linearStateSlots: o.linearStateSlots,
          hostBlocks: o.hostBlocks,
          ...(o.eviction !== 'lru' && { evictionPolicy: o.eviction }),
          onProgress: bar
            ? (done, total) => {
                if (!started) {
                  bar.start(total, 0);
                  started = true;
                }
                bar.update(done);
              }
            : undefined,
        });
      } finally {
        sink?.close();
      }
      bar?.stop();
      if (o.json) process.stdout.write(JSON.stringify(result) + '\n');
      else {
        const what = trace ?? `built-in workload (${o.requests} requests, seed ${o.seed})`;
        const layout = o.slidingWindow ? `, composite: window ${o.slidingWindow}, ratios ${(o.compressRatios ?? [1]).join(',')}` : '';
        process.stdout.write(formatResult(result, `kvpool replay: ${what}${layout}`) + '\n');
      }
    });
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    const ce = e as { code?: string; exitCode?: number };
    if (typeof ce.code === 'string' && ce.code.startsWith('commander.')) {
      // commander already printed its message (help and version exit with 0)
      return ce.exitCode ?? 1;
    }
    process.stderr.write(`kvpool: ${(e as Error).message}\n`);
    code = 1;
  }
  return code;
}

// Run when executed directly (also through npm's bin symlink), not when imported by tests.
function isMain(): boolean {
  try {
    return !!process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}
if (isMain()) {
  main(process.argv.slice(2)).then((c) => {
    process.exitCode = c;
  });
}
