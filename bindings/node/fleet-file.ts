// Node's `fleet()`: the library's, plus traces named by file, `-` (stdin) or
// built-in name, read before the fleet starts.

import { fleet as fleetRequests, fleetSync } from '../fleet/fleet.js';
import { parseFleetOptions, type FleetOptions } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { readTraceFile } from './trace-file.js';
import { fleetOnThreadsOf } from './fleet-threads.js';
import { traceArg } from '../replay/replay.js';

/**
 * Replays a trace through a fleet of engines behind a router (see the
 * library's `fleet`); `options.trace` may also be a file name, `-` or a
 * built-in trace name, and `options.threads` puts the engines on worker threads.
 */
export async function fleet(options: FleetOptions = {}): Promise<FleetRun> {
  const spec = options?.trace;
  const p = parseFleetOptions(options);
  if (typeof spec !== 'string' && p.threads === 0) return fleetRequests(options);
  const requests = typeof spec === 'string' ? await readTraceFile(spec, p.replay.limit ?? Infinity) : traceArg(options);
  const name = typeof spec === 'string' ? spec : requests === undefined ? undefined : 'requests';
  if (p.threads > 0) return fleetOnThreadsOf({ ...options, trace: requests }, p, name);
  return fleetSync({ ...options, trace: requests }, name);
}
