// npm run bench (last part) / npm run bench:events: the replay of the
// Mooncake conversation trace with KV-cache events written to a file (what
// `kvpool replay --events FILE` does) against the plain replay, side by
// side. Runs alternate (plain, file, /dev/null, record only) so that a slow
// phase of this shared machine hits every variant alike; the table gives the
// median wall time of each and its ratio to the plain replay's median. The
// target: the file within 3x of the plain replay.
//
//   npm run bench:events [-- --rounds 5]

import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import '../bindings/wasm-node.js';
import { eventOutputs } from '../bindings/node/event-file.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { replaySync, type ReplayRun } from '../bindings/replay/replay.js';
import { replayWithEventHook } from '../bindings/replay/replay-events.js';
import { phase, progress } from './progress.js';
import { median } from './median.js';

const TRACE = process.env['KVPOOL_TRACE'] ?? 'mooncake-conversation';
const arg = process.argv.indexOf('--rounds');
const ROUNDS = arg > 0 ? Number(process.argv[arg + 1]) : 3;

const trace = await readTraceFile(TRACE);
const dir = mkdtempSync(join(tmpdir(), 'kvpool-bench-events-'));
const file = join(dir, 'events.msgpack');

const same = (a: ReplayRun, b: ReplayRun) => a.idChecksum === b.idChecksum && a.evictedBlocks === b.evictedBlocks && a.matchedBlocks === b.matchedBlocks;

const variants: Array<[string, () => ReplayRun]> = [
  ['plain replay', () => replaySync({ trace })],
  [
    'events to a file (kvpool replay --events FILE)',
    () => {
      const out = eventOutputs(file, null);
      try {
        return replayWithEventHook({ trace }, out.hook);
      } finally {
        out.close();
      }
    },
  ],
  [
    'events to /dev/null (encoding, no disk)',
    () => {
      const out = eventOutputs('/dev/null', null);
      try {
        return replayWithEventHook({ trace }, out.hook);
      } finally {
        out.close();
      }
    },
  ],
  ['events recorded, not encoded', () => replayWithEventHook({ trace }, (pool) => pool.drainEventRecords(() => {}))],
];

phase(`replay with events of ${TRACE}`, `${ROUNDS} rounds of ${variants.length} variants, ~${ROUNDS * 15} s`);
const times = variants.map(() => [] as number[]);
const cpu = variants.map(() => [] as number[]);
let reference: ReplayRun | null = null;
const bar = progress('rounds', ROUNDS);
try {
  for (let r = 0; r < ROUNDS; r++) {
    bar.update(r, `round ${r + 1} of ${ROUNDS}`);
    variants.forEach(([name, run], i) => {
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const result = run();
      times[i]!.push((performance.now() - t0) / 1000);
      const c = process.cpuUsage(c0);
      cpu[i]!.push((c.user + c.system) / 1e6);
      reference ??= result;
      if (!same(result, reference)) throw new Error(`${name}: the replay's result differs from the plain replay's`);
    });
  }
  bar.update(ROUNDS);
} finally {
  bar.stop();
}
const bytes = statSync(file).size;
// The floor the disk sets: writing as many bytes alone, in the same chunks, to the same file.
const writes: number[] = [];
const chunk = new Uint8Array(8 << 20).fill(7);
for (let r = 0; r < ROUNDS; r++) {
  const t0 = performance.now();
  const fd = openSync(file, 'w');
  for (let done = 0; done < bytes; done += chunk.length) writeSync(fd, chunk, 0, Math.min(chunk.length, bytes - done));
  closeSync(fd);
  writes.push((performance.now() - t0) / 1000);
}
rmSync(dir, { recursive: true });

const base = median(times[0]!);
const cpuBase = median(cpu[0]!);
console.log(`\nReplay of ${TRACE} (${trace.length} requests) with KV-cache events, median of ${ROUNDS} alternating rounds`);
console.log('(wall: what the command takes; CPU: user + system time of this process)');
console.log('| variant | wall (s) | all rounds | wall / plain | CPU (s) | CPU / plain |');
console.log('| --- | ---: | --- | ---: | ---: | ---: |');
variants.forEach(([name], i) => {
  const m = median(times[i]!);
  const c = median(cpu[i]!);
  console.log(`| ${name} | ${m.toFixed(2)} | ${times[i]!.map((t) => t.toFixed(2)).join(', ')} | ${(m / base).toFixed(2)}x | ${c.toFixed(2)} | ${(c / cpuBase).toFixed(2)}x |`);
});
console.log(`| writing ${(bytes / 1e6).toFixed(0)} MB alone (the disk's share) | ${median(writes).toFixed(2)} | ${writes.map((t) => t.toFixed(2)).join(', ')} | ${(median(writes) / base).toFixed(2)}x | | |`);
console.log(`Event file: ${(bytes / 1e6).toFixed(0)} MB (vLLM KVEventBatch msgpack, map form, uint64 hashes, every stored block's tokens)`);
