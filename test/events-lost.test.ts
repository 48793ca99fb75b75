// KV-cache events that memory cannot hold: recording drops them, says so at
// the next drain (or snapshot), and the cache itself goes on unaffected.
// The test takes every region the core can still hand out (up to 4 GiB of
// linear memory, reserved but hardly touched: fresh pages are never zeroed).

import { expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';

const B = 16;
const prompt = (n: number) => Int32Array.from({ length: n }, (_, i) => 7 * i + 1);

it('events a full memory cannot hold are lost and said so; the cache goes on without them', () => {
  const rt = plainCore();
  const m = new BlockManagerImpl({ numBlocks: 4096, blockSize: B });
  m.recordEvents(true, { snapshots: true });
  const tokens = prompt(2000 * B);
  hashBlocks(tokens, B); // the staging area holds these tokens before memory is filled
  const ids = m.allocate(2000)!;
  const filler: number[] = [];
  for (const size of [256 << 20, 16 << 20, 1 << 20, 64 << 10]) {
    for (let p = rt.alloc(size); p !== 0; p = rt.alloc(size)) filler.push(p);
  }
  try {
    // 2,000 stored records of 112 bytes need a log of 256 KiB: there is none.
    expect(m.cache(tokens, ids)).toBe(2000);
    expect(m.numBlocksInPrefixCache()).toBe(2000);
    expect(() => m.snapshotEvents()).toThrow(/^kvpool: KV-cache events were lost: drain them before taking a snapshot$/);
    expect(() => m.drainEvents()).toThrow(/^kvpool: KV-cache events were lost: Wasm memory ran out, or more than 1 GiB of records waited to be drained$/);
    m.deallocate(ids);
    m.check();
  } finally {
    for (const p of filler) rt.release(p);
  }
  // Said once: recording goes on from an empty log, and a snapshot tells a
  // consumer what the lost records would have (every block counts as announced).
  expect(m.drainEvents()).toEqual([]);
  expect(m.snapshotEvents().map((e) => (e as { blockId: number }).blockId).sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
  expect(m.evict(1)).toBe(1);
  expect(m.drainEvents().map((e) => e.type)).toEqual(['removed']);
  m.dispose();
});
