// The engine-choosing front of `replay()` (docs/engines.md): `engine: 'xllm'`
// (the default) runs the replay kernel on a BlockManagerPool exactly as
// before, `engine: 'vllm'` vLLM v1's scheduler on its block pool. vLLM's
// option names are taken where they mean the same for both engines
// (`maxNumSeqs` for `maxRunning`, `numGpuBlocksOverride` for
// `numBlocks`); options only one engine has are refused for the other,
// with the reason.

import { replay as replayXllm, replaySync as replayXllmSync, type ParsedReplayOptions, type ReplayOptions, type ReplayRun } from '../replay/replay.js';
import { checkObject } from '../validate.js';
import { replayVllm, replayVllmSync, type ParsedVllmReplayOptions, type VllmReplayOptions, type VllmReplayRun } from '../vllm/replay.js';

export const ENGINES = ['xllm', 'vllm'] as const;
export type Engine = (typeof ENGINES)[number];

/** The xllm engine's options, `engine` and vLLM's names for the options both engines have included. */
export interface XllmReplayOptions extends ReplayOptions {
  engine?: 'xllm';
  /** `maxRunning` under vLLM's name. */
  maxNumSeqs?: number;
  /** `numBlocks` under vLLM's name. */
  numGpuBlocksOverride?: number;
}

export type EngineReplayOptions = XllmReplayOptions | VllmReplayOptions;
export type EngineReplayRun = ReplayRun | VllmReplayRun;

/** The vllm engine's options, each with why the xllm engine refuses it. */
const VLLM_ONLY_OPTIONS: Readonly<Record<string, string>> = {
  maxNumBatchedTokens: 'a per-step token budget belongs to vLLM\'s scheduler; the xllm replay kernel prefills each prompt whole',
  longPrefillTokenThreshold: 'chunked prefill belongs to vLLM\'s scheduler; the xllm replay kernel prefills each prompt whole',
  schedulerReserveFullIsl: 'admission by the whole prompt belongs to vLLM\'s scheduler',
  onStep: 'the xllm replay kernel runs request by request, not in engine steps',
};

/** The engine `options` choose ('xllm' when absent). */
export function engineOf(options: unknown): Engine {
  checkObject('options', options);
  const e = (options as { engine?: unknown }).engine;
  if (e === undefined || e === 'xllm' || e === 'vllm') return e ?? 'xllm';
  throw new TypeError(`options.engine must be 'xllm' or 'vllm', got ${JSON.stringify(e)}`);
}

/** xllm options as the kernel's replay takes them: aliases resolved, vLLM-only options refused by name. */
export function xllmOptions(options: XllmReplayOptions): ReplayOptions {
  const { engine: _engine, maxNumSeqs, numGpuBlocksOverride, ...rest } = options;
  for (const k of Object.keys(rest)) {
    const why = VLLM_ONLY_OPTIONS[k];
    if (why !== undefined && (rest as Record<string, unknown>)[k] !== undefined) throw new TypeError(`options.${k} needs engine 'vllm': ${why}`);
  }
  const out: ReplayOptions = { ...rest };
  const same = (ours: 'maxRunning' | 'numBlocks', theirs: string, v: number | undefined) => {
    if (v === undefined) return;
    if (out[ours] !== undefined && out[ours] !== v) {
      throw new RangeError(`options.${ours} and options.${theirs} are one option (kvpool's name and vLLM's) and disagree: ${out[ours]} and ${v}`);
    }
    out[ours] = v;
  };
  same('maxRunning', 'maxNumSeqs', maxNumSeqs);
  same('numBlocks', 'numGpuBlocksOverride', numGpuBlocksOverride);
  return out;
}

/**
 * Replays a trace (or the built-in workload) on the engine `options.engine`
 * chooses (default 'xllm': the replay kernel on a fresh pool, docs/replay.md;
 * 'vllm': vLLM v1's scheduler and block pool, docs/engines.md).
 */
export function replay(options?: XllmReplayOptions): Promise<ReplayRun>;
export function replay(options: VllmReplayOptions): Promise<VllmReplayRun>;
export function replay(options?: EngineReplayOptions): Promise<EngineReplayRun>;
export function replay(options: EngineReplayOptions = {}): Promise<EngineReplayRun> {
  try {
    return engineOf(options) === 'vllm' ? replayVllm(options as VllmReplayOptions) : replayXllm(xllmOptions(options as XllmReplayOptions));
  } catch (e) {
    return Promise.reject(e);
  }
}

/**
 * `replay` once the core is loaded (always the case in Node). `parsed`: the
 * options as that engine's parser returned them (skips parsing again);
 * `traceName`: what `config.trace` says.
 */
export function replaySync(options?: XllmReplayOptions, parsed?: ParsedReplayOptions, traceName?: string): ReplayRun;
export function replaySync(options: VllmReplayOptions, parsed?: ParsedVllmReplayOptions, traceName?: string): VllmReplayRun;
export function replaySync(options?: EngineReplayOptions, parsed?: ParsedReplayOptions | ParsedVllmReplayOptions, traceName?: string): EngineReplayRun;
export function replaySync(options: EngineReplayOptions = {}, parsed?: ParsedReplayOptions | ParsedVllmReplayOptions, traceName?: string): EngineReplayRun {
  if (engineOf(options) === 'vllm') return replayVllmSync(options as VllmReplayOptions, parsed as ParsedVllmReplayOptions | undefined, traceName);
  return replayXllmSync(xllmOptions(options as XllmReplayOptions), parsed as ParsedReplayOptions | undefined, traceName);
}
