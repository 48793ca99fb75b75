// Node's `replay()`: the library's (either engine), plus traces named by
// file, `-` (stdin) or built-in name, read before the replay starts.

import { engineOf, replay as replayRequests, replaySync, xllmOptions, type EngineReplayOptions, type EngineReplayRun, type XllmReplayOptions } from '../engines/replay.js';
import { parseReplayOptions, type ReplayRun } from '../replay/replay.js';
import { parseVllmReplayOptions, type VllmReplayOptions, type VllmReplayRun } from '../vllm/replay.js';
import { readTraceFile } from './trace-file.js';

/**
 * Replays a trace on the engine `options.engine` chooses (see the library's
 * `replay`); `options.trace` may also be a file name, `-` or a built-in
 * trace name.
 */
export function replay(options?: XllmReplayOptions): Promise<ReplayRun>;
export function replay(options: VllmReplayOptions): Promise<VllmReplayRun>;
export function replay(options?: EngineReplayOptions): Promise<EngineReplayRun>;
export async function replay(options: EngineReplayOptions = {}): Promise<EngineReplayRun> {
  const spec = options?.trace;
  if (typeof spec !== 'string') return replayRequests(options);
  // Options are checked before the trace is read: a bad one fails at once.
  if (engineOf(options) === 'vllm') {
    const p = parseVllmReplayOptions(options as VllmReplayOptions);
    const requests = await readTraceFile(spec, p.limit ?? Infinity);
    return replaySync({ ...(options as VllmReplayOptions), trace: requests }, p, spec);
  }
  const o = xllmOptions(options as XllmReplayOptions);
  const p = parseReplayOptions(o);
  const requests = await readTraceFile(spec, p.limit ?? Infinity);
  return replaySync({ ...o, trace: requests }, p, spec);
}
