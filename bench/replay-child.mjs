// One replay of a built package, for bench/replay-builds.ts: reads the
// trace, runs replaySync once and prints its result with the CPU seconds the
// replay took (user + system, trace parsing excluded). CPU time leaves out
// the time this process waited for a core that others held; on this shared
// machine it moves less than the loop's wall time.
//   node bench/replay-child.mjs <package dir> '<options JSON>'

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [pkg, json] = process.argv.slice(2);
const { readTraceFile, replaySync } = await import(pathToFileURL(join(pkg, 'dist/index.node.js')).href);
const { trace: name, ...options } = JSON.parse(json);
const trace = await readTraceFile(name, options.limit === undefined ? {} : { limit: options.limit });
const c0 = process.cpuUsage();
const r = replaySync({ ...options, trace });
const c = process.cpuUsage(c0);
process.stdout.write(JSON.stringify({ ...r, cpuSeconds: (c.user + c.system) / 1e6 }));
