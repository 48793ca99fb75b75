// Node's `fleet()`: the library's, plus traces named by file, `-` (stdin) or
// built-in name, read before the fleet starts.

import { fleet as fleetRequests, fleetSync } from '../fleet/fleet.js';
import { parseFleetOptions, type FleetOptions } from '../fleet/fleet-options.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { readTraceFile } from './trace-file.js';

/**
 * Replays a trace through a fleet of engines behind a router (see the
 * library's `fleet`); `options.trace` may also be a file name, `-` or a
 * built-in trace name.
 */
export async function fleet(options: FleetOptions = {}): Promise<FleetRun> {
  const spec = options?.trace;
  if (typeof spec !== 'string') return fleetRequests(options);
  const p = parseFleetOptions(options);
  const requests = await readTraceFile(spec, p.replay.limit ?? Infinity);
  return fleetSync({ ...options, trace: requests }, spec);
}
