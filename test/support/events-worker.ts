// Worker side of test/sealed-core.test.ts: attaches to the manager described
// in workerData, runs the given operations on it (block size 2) with events
// recorded, drains them here and posts them back.

import { parentPort, workerData } from 'node:worker_threads';
import '../../bindings/wasm-node.js';
import { ConcurrentBlockManagerImpl, type SharedManagerDescriptor } from '../../bindings/managers/concurrent-block-manager-impl.js';

type Op = ['allocate', number] | ['cache', number[], number] | ['release', number] | ['evict', number];
const { desc, ops } = workerData as { desc: SharedManagerDescriptor; ops: Op[] };

const m = ConcurrentBlockManagerImpl.attach(desc);
m.recordEvents(true);
const batches: Int32Array[] = [];
for (const op of ops) {
  if (op[0] === 'allocate') {
    const a = m.allocate(op[1]);
    if (a) batches.push(a);
  } else if (op[0] === 'cache') m.cache(op[1], batches[op[2]]!.slice(0, op[1].length / 2));
  else if (op[0] === 'release') m.deallocate(batches.splice(op[1], 1)[0]!);
  else m.evict(op[1]);
}
const events = m.drainEvents(0);
m.dispose();
parentPort!.postMessage(events);
