// `kvpool replay --engine vllm`: vLLM v1's scheduler and block pool
// (docs/engines.md). Its flags (vLLM's names where they mean the same as
// kvpool's), the refusals of flags one engine does not take, the per-step
// file, and the result as a table, JSON, JSON Lines or CSV.

import { closeSync, openSync, writeSync } from 'node:fs';
import { Command, Option } from 'commander';
import { ENGINES } from '../engines/replay.js';
import { readTraceFile } from '../node/trace-file.js';
import { stepLine } from '../vllm/engine.js';
import { XLLM_ONLY_OPTIONS, openVllmReplay, parseVllmReplayOptions, replayVllmSync, type VllmReplayOptions, type VllmReplayRun } from '../vllm/replay.js';
import { eventOutputs } from '../node/event-file.js';
import { publishing, wireOptions, type EventFlags } from './replay-events.js';
import { csvOf, count, get, percent, type OutputFormat } from './format.js';
import { parseIntArg } from './options.js';
import { VLLM_CONFIG_GLOSSARY, VLLM_RANK_GLOSSARY, VLLM_RESULT_GLOSSARY, vllmGlossaryHelp } from './vllm-glossary.js';

/** The flags the engines add to `kvpool replay`. */
export interface EngineFlags {
  engine: 'xllm' | 'vllm';
  maxNumSeqs?: number;
  numGpuBlocksOverride?: number;
  maxNumBatchedTokens?: number;
  longPrefillTokenThreshold?: number;
  schedulerReserveFullIsl: boolean;
  stepsOut?: string;
}

/** vLLM-only flags, each with why the xllm engine refuses it. */
const VLLM_ONLY_FLAGS: ReadonlyArray<[keyof EngineFlags, string, string]> = [
  ['maxNumBatchedTokens', '--max-num-batched-tokens', 'a per-step token budget belongs to vLLM\'s scheduler; the xllm replay kernel prefills each prompt whole'],
  ['longPrefillTokenThreshold', '--long-prefill-token-threshold', 'chunked prefill belongs to vLLM\'s scheduler; the xllm replay kernel prefills each prompt whole'],
  ['schedulerReserveFullIsl', '--no-scheduler-reserve-full-isl', 'admission by the whole prompt belongs to vLLM\'s scheduler'],
  ['stepsOut', '--steps-out', 'the xllm replay kernel runs request by request, not in engine steps'],
];

/** The engine's flags `kvpool replay`, `kvpool fleet` and `kvpool sweep` share: vLLM's names, and the vllm engine's own switches. */
export function addVllmNameOptions(cmd: Command): Command {
  return cmd
    .option('--max-num-seqs <n>', 'vLLM\'s name of --max-running (either engine)', (v: string) => parseIntArg('--max-num-seqs', 1, v))
    .option('--num-gpu-blocks-override <n>', 'vLLM\'s name of --num-blocks (either engine)', (v: string) => parseIntArg('--num-gpu-blocks-override', 2, v))
    .option('--long-prefill-token-threshold <n>', 'vllm: a prefill\'s tokens per step at most (default 0: no cap)', (v: string) => parseIntArg('--long-prefill-token-threshold', 0, v))
    .option('--no-scheduler-reserve-full-isl', 'vllm: admit a request when its first chunk fits, not only when all its tokens do (vLLM\'s scheduler_reserve_full_isl, on by default)');
}

/** What --engine says in every command's help. */
export const ENGINE_FLAG_HELP = 'xllm: xLLM\'s BlockManagerPool under the replay kernel (docs/replay-kernel.md); vllm: vLLM v1\'s scheduler and block pool, step by step (docs/engines.md)';

export function addEngineOptions(cmd: Command): void {
  cmd.addOption(new Option('--engine <engine>', ENGINE_FLAG_HELP).choices(ENGINES).default('xllm'));
  addVllmNameOptions(cmd)
    .option('--max-num-batched-tokens <n>', 'vllm: tokens scheduled per step and rank (default: no limit; vLLM serves with 8192 or 2048)', (v: string) => parseIntArg('--max-num-batched-tokens', 1, v))
    .option('--steps-out <file>', 'vllm: write one line per engine step: step scheduled_tokens scheduled_reqs admitted preempted finished free_queue_len');
}

/**
 * The engine flags of a fleet (`kvpool fleet`, and a sweep's fleets) added
 * to its replay options, as `fleet()` takes them: vLLM's names given
 * replace the defaults of kvpool's; --engine xllm refuses the vllm
 * engine's switches and --engine vllm the xllm engine's modes, each by flag
 * with the reason (the replay's rules); `engine` is left out for xllm.
 */
export function engineReplayOptions<T extends object>(cmd: Command, o: Record<string, unknown>, replay: T, engine: 'xllm' | 'vllm'): T {
  const out = { ...replay } as Record<string, unknown>;
  // One value per option, however it was given (both: they must agree).
  if (o['maxNumSeqs'] !== undefined) out['maxRunning'] = aliased(cmd, o, 'maxRunning', 'maxNumSeqs');
  if (o['numGpuBlocksOverride'] !== undefined) out['numBlocks'] = aliased(cmd, o, 'numBlocks', 'numGpuBlocksOverride');
  if (engine === 'xllm') {
    refuseVllmSwitches(cmd);
    return out as T;
  }
  refuseXllmFlags(cmd);
  for (const key of Object.keys(XLLM_ONLY_OPTIONS)) delete out[key]; // their defaults: the vllm engine has none of these modes
  out['engine'] = 'vllm';
  if (o['longPrefillTokenThreshold'] !== undefined) out['longPrefillTokenThreshold'] = o['longPrefillTokenThreshold'];
  if (given(cmd, 'schedulerReserveFullIsl')) out['schedulerReserveFullIsl'] = false;
  return out as T;
}

/** --engine xllm in a fleet or sweep: refuses the vllm engine's own switches (--max-num-batched-tokens is scheduler continuous's too), by flag with the reason. */
export function refuseVllmSwitches(cmd: Command): void {
  for (const [key, flag, why] of VLLM_ONLY_FLAGS) if (key !== 'maxNumBatchedTokens' && key !== 'stepsOut' && given(cmd, key)) throw new RangeError(`${flag} needs --engine vllm: ${why}`);
}

/** --engine vllm: refuses the xllm engine's own flags, naming each with the reason. */
export function refuseXllmFlags(cmd: Command): void {
  for (const key of Object.keys(XLLM_ONLY_OPTIONS)) {
    if (given(cmd, key)) throw new RangeError(`${flagOf(key)} cannot be used with --engine vllm: ${XLLM_ONLY_OPTIONS[key]}`);
  }
}

/** Whether the user gave flag `key` (not its default). */
const given = (cmd: Command, key: string) => cmd.getOptionValueSource(key) === 'cli';

/** The flag name of a camelCase option key. */
const flagOf = (key: string) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/** One value of an option given under kvpool's name and vLLM's (both given: they must agree; lists too). */
export function aliased(cmd: Command, o: Record<string, unknown>, ours: string, theirs: string): number | undefined {
  const a = given(cmd, ours) ? (o[ours] as number) : undefined;
  const b = o[theirs] as number | undefined;
  if (a !== undefined && b !== undefined && String(a) !== String(b)) throw new RangeError(`${flagOf(ours)} ${String(a)} and ${flagOf(theirs)} ${String(b)} are one option (kvpool's name and vLLM's) and disagree`);
  return a ?? b;
}

/**
 * For --engine xllm: refuses the vLLM-only flags, and resolves vLLM's names
 * of --max-running and --num-blocks. Returns the two values to use.
 */
export function xllmEngineFlags(cmd: Command, o: EngineFlags & { maxRunning: number; numBlocks: number }): { maxRunning: number; numBlocks: number } {
  for (const [key, flag, why] of VLLM_ONLY_FLAGS) if (given(cmd, key)) throw new RangeError(`${flag} needs --engine vllm: ${why}`);
  const rec = o as unknown as Record<string, unknown>;
  return { maxRunning: aliased(cmd, rec, 'maxRunning', 'maxNumSeqs') ?? o.maxRunning, numBlocks: aliased(cmd, rec, 'numBlocks', 'numGpuBlocksOverride') ?? o.numBlocks };
}

/** --engine vllm: the flags as replay options, the xllm engine's own flags refused with the reason. */
export function vllmOptionsOf(cmd: Command, o: Record<string, unknown>): VllmReplayOptions {
  refuseXllmFlags(cmd);
  const maxRunning = aliased(cmd, o, 'maxRunning', 'maxNumSeqs');
  const numBlocks = aliased(cmd, o, 'numBlocks', 'numGpuBlocksOverride');
  return {
    engine: 'vllm',
    blockSize: o['blockSize'] as number,
    numBlocks: numBlocks ?? (o['numBlocks'] as number),
    dpSize: o['dpSize'] as number,
    maxRunning: maxRunning ?? (o['maxRunning'] as number),
    seed: o['seed'] as number,
    requests: o['requests'] as number,
    schedulerReserveFullIsl: o['schedulerReserveFullIsl'] as boolean,
    ...(o['limit'] !== undefined && { limit: o['limit'] as number }),
    ...(o['maxNumBatchedTokens'] !== undefined && { maxNumBatchedTokens: o['maxNumBatchedTokens'] as number }),
    ...(o['longPrefillTokenThreshold'] !== undefined && { longPrefillTokenThreshold: o['longPrefillTokenThreshold'] as number }),
  };
}

/** Writes step lines to a file in large writes (a whole-trace replay has ~130,000 of them); a failure names --steps-out. */
class StepFile {
  private fd: number;
  private buf = '';
  constructor(private readonly path: string) {
    try {
      this.fd = openSync(path, 'w');
    } catch (e) {
      throw this.failure(e);
    }
  }
  add(line: string): void {
    this.buf += line;
    if (this.buf.length > 1 << 16) this.flush();
  }
  flush(): void {
    try {
      if (this.buf.length > 0) writeSync(this.fd, this.buf);
    } catch (e) {
      throw this.failure(e);
    }
    this.buf = '';
  }
  private failure(e: unknown): Error {
    return new Error(`--steps-out: cannot write ${JSON.stringify(this.path)}: ${(e as Error).message}`);
  }
  close(): void {
    if (this.fd < 0) return;
    try {
      this.flush();
    } finally {
      closeSync(this.fd);
      this.fd = -1;
    }
  }
}

/**
 * Runs `kvpool replay --engine vllm` (options checked before the trace is
 * read); returns the run. With --events or --zmq the caches record their
 * KV events in vLLM's order, and each step's go out as one batch per dp
 * rank with events (docs/events.md, from the replay command).
 */
export async function runVllmCommand(
  cmd: Command, spec: string | undefined, o: Record<string, unknown> & EventFlags, onProgress: ((done: number, total: number) => void) | undefined,
): Promise<VllmReplayRun> {
  const options = vllmOptionsOf(cmd, o);
  const parsed = parseVllmReplayOptions(options);
  const requests = spec === undefined ? undefined : await readTraceFile(spec, parsed.limit ?? Infinity);
  const steps = o['stepsOut'] !== undefined ? new StepFile(o['stepsOut'] as string) : null;
  const run: VllmReplayOptions = { ...options, ...(requests && { trace: requests }), ...(steps && { onStep: (s) => steps.add(stepLine(s)) }) };
  try {
    if (o.zmq !== undefined) {
      return await publishing(o, parsed.dpSize, onProgress, (out) => {
        const r = openVllmReplay(run, parsed, spec, true);
        let step = 0;
        return {
          step: () => {
            if (!r.loop.step()) return false;
            out.vllmHook(r.kvs, ++step);
            return true;
          },
          done: () => r.loop.created,
          total: r.loop.total,
          finish: () => r.finish(),
          dispose: () => r.dispose(),
        };
      });
    }
    if (o.events !== undefined) {
      const out = eventOutputs(o.events, null, wireOptions(o));
      try {
        const r = openVllmReplay({ ...run, ...(onProgress && { onProgress }) }, parsed, spec, true);
        try {
          for (let step = 1; r.loop.step(); step++) out.vllmHook(r.kvs, step);
          return r.finish();
        } finally {
          r.dispose();
        }
      } finally {
        out.close();
      }
    }
    return replayVllmSync({ ...run, ...(onProgress && { onProgress }) }, parsed, spec);
  } finally {
    steps?.close();
  }
}

function cell(key: string, v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'number') {
    if (key === 'hitRate') return percent(v);
    if (key === 'seconds') return v.toFixed(3);
    return v.toLocaleString('en-US');
  }
  return String(v);
}

/** One vLLM result as a table: title, configuration, figures, ranks when there are several. */
export function formatVllmRun(r: VllmReplayRun, title: string): string {
  const config = VLLM_CONFIG_GLOSSARY.filter((e) => !['config.engine', 'config.trace'].includes(e.key))
    .filter((e) => e.key === 'config.maxNumBatchedTokens' || get(r, e.key) !== null)
    .map((e) => {
      const v = get(r, e.key);
      return `${e.label} ${v === null ? 'no limit' : typeof v === 'boolean' ? (v ? 'yes' : 'no') : String(v)}`;
    })
    .join(' · ');
  const rows = VLLM_RESULT_GLOSSARY.map((e) => [e.label, cell(e.key, get(r, e.key))] as const);
  const w = Math.max(...rows.map(([k]) => k.length));
  const vw = Math.max(...rows.map(([, v]) => v.length));
  const out = [title, `  ${config}`, '', ...rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v.padStart(vw)}`)];
  if (r.ranks.length > 1) {
    const head = VLLM_RANK_GLOSSARY.map((e) => e.label);
    const body = r.ranks.map((k) => VLLM_RANK_GLOSSARY.map((e) => (get(k, e.key.slice('ranks[].'.length)) as number).toLocaleString('en-US')));
    const cw = head.map((h, c) => Math.max(h.length, ...body.map((row) => row[c]!.length)));
    const line = (cells: string[]) => '  ' + cells.map((x, c) => x.padStart(cw[c]!)).join('  ');
    out.push('', line(head), ...body.map(line));
  }
  return out.join('\n');
}

/** Prints a vLLM result in `format`. */
export function writeVllm(r: VllmReplayRun, format: OutputFormat, spec: string | undefined, seed: number): void {
  let text: string;
  if (format === 'json' || format === 'jsonl') text = JSON.stringify(r) + '\n';
  else if (format === 'csv') text = csvOf([r], [...VLLM_CONFIG_GLOSSARY.map((e) => e.key), ...VLLM_RESULT_GLOSSARY.map((e) => e.key), 'warnings']);
  else text = formatVllmRun(r, `kvpool replay: ${spec ?? `built-in workload (seed ${seed})`}, ${count(r.requests, 'request')}, engine vllm`) + '\n';
  process.stdout.write(text);
}

/** How to choose an engine, for `kvpool replay --help`. */
export function engineHelp(): string {
  return [
    '',
    'Engines (--engine; docs/engines.md):',
    '  xllm  (default) xLLM\'s BlockManagerPool under the replay kernel: one request prefilled at a time, a FIFO of',
    '        --max-running sequences; LRU, LFU or priority eviction, host tier, sliding window, linear state, events.',
    '  vllm  vLLM v1\'s Scheduler and KVCacheManager, exactly (checked against vLLM\'s own code): steps under a token',
    '        budget (--max-num-batched-tokens, --long-prefill-token-threshold), --max-num-seqs running together,',
    '        preemption of the newest request with recompute, a FIFO free queue with lazy eviction; --steps-out.',
    'Choose vllm to predict what a vLLM deployment\'s cache does (hits, preemptions, per-step batches); xllm for',
    'xLLM, and for the modes only it has. vLLM\'s names --max-num-seqs and --num-gpu-blocks-override work for both.',
    vllmGlossaryHelp(),
  ].join('\n');
}
