// Node's `sloSearch()`: the library's, plus traces named by file, `-`
// (stdin) or built-in name, read (synchronously, as the search runs) before
// the first fleet starts.

import { parseFleetOptions, type FleetOptions } from '../fleet/fleet-options.js';
import { checkSloTargets, sloSearch as sloSearchRequests, type SloSearchResult, type SloTargets } from '../fleet/slo-search.js';
import { readTraceFileSync } from './trace-file-sync.js';

/**
 * The fewest engines meeting `slo` (see the library's `sloSearch`);
 * `options.trace` may also be a file name, `-` or a built-in trace name
 * (then `config.trace` names it). Synchronous, as the library's.
 */
export function sloSearch(options: FleetOptions, slo: SloTargets, engineCounts: number | readonly number[], traceName?: string): SloSearchResult {
  const spec = options?.trace;
  if (typeof spec !== 'string') return sloSearchRequests(options, slo, engineCounts, traceName);
  // Bad options and targets fail before a trace is read.
  const p = parseFleetOptions(options);
  checkSloTargets(slo);
  const requests = readTraceFileSync(spec, p.replay.limit ?? Infinity);
  return sloSearchRequests({ ...options, trace: requests }, slo, engineCounts, traceName ?? spec);
}
