// One replay of a built package for bench/instructions.ts, run under
// valgrind: reads the trace, collects garbage, replays once, collects
// garbage again, so that no collection of the parsing lands in the replay
// and the counts repeat from run to run. Prints nothing.
//   node --expose-gc bench/instructions-child.mjs <package dir> '<options JSON>'

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [pkg, json] = process.argv.slice(2);
const { readTraceFile, replaySync } = await import(pathToFileURL(join(pkg, 'dist/index.node.js')).href);
const { trace: name, ...options } = JSON.parse(json);
const trace = await readTraceFile(name, options.limit === undefined ? {} : { limit: options.limit });
globalThis.gc();
replaySync({ ...options, trace });
globalThis.gc();
