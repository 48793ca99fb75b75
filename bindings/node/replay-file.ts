// Node's `replay()`: the library's, plus traces named by file, `-` (stdin)
// or built-in name, read before the replay starts.

import { replay as replayRequests, parseReplayOptions, replaySync, type ReplayOptions, type ReplayRun } from '../replay/replay.js';
import { readTraceFile } from './trace-file.js';

/**
 * Replays a trace through a fresh pool (see the library's `replay`);
 * `options.trace` may also be a file name, `-` or a built-in trace name.
 */
export async function replay(options: ReplayOptions = {}): Promise<ReplayRun> {
  const spec = options?.trace;
  if (typeof spec !== 'string') return replayRequests(options);
  const p = parseReplayOptions(options);
  const requests = await readTraceFile(spec, p.limit ?? Infinity);
  return replaySync({ ...options, trace: requests }, p, spec);
}
