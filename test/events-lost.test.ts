// KV-cache events that memory cannot hold: recording drops them and says so
// at the next drain (or snapshot), the cache itself unaffected; a snapshot,
// or recording with snapshots, that does not fit is refused and changes nothing.
// The test takes every region the core can still hand out (up to 4 GiB of
// linear memory, reserved but hardly touched: fresh pages are never zeroed,
// which is also why it fills memory once).

import { expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { takeAllRegions } from './support/core-memory.js';

const B = 16;
const prompt = (n: number, base: number) => Int32Array.from({ length: n }, (_, i) => 7 * i + base);
const idsOf = (events: unknown[]) => events.map((e) => (e as { blockId: number }).blockId);

it('with memory full, records are lost and said so once, and a snapshot is refused without touching what is pending', () => {
  const rt = plainCore();
  // `lossy` will record what memory cannot hold; `pending` has records waiting.
  const lossy = new BlockManagerImpl({ numBlocks: 4096, blockSize: B });
  lossy.recordEvents(true, { snapshots: true });
  const lossyTokens = prompt(2000 * B, 1);
  hashBlocks(lossyTokens, B); // the staging area holds these tokens before memory is filled
  const lossyIds = lossy.allocate(2000)!;
  const pending = new BlockManagerImpl({ numBlocks: 4096, blockSize: B });
  pending.recordEvents(true, { snapshots: true });
  const late = new BlockManagerImpl({ numBlocks: 4096, blockSize: B }); // starts recording once memory is full
  const pendingIds = pending.allocate(500)!;
  pending.cache(prompt(500 * B, 3), pendingIds); // 500 stored records (56,000 bytes of a 64 KiB log)

  // Every region there is, but a 32 KiB hole: room for a snapshot's work
  // list (16 KiB), not for its records.
  const hole = rt.alloc(32 << 10);
  const filler = takeAllRegions(rt);
  rt.release(hole);
  try {
    expect(() => pending.snapshotEvents()).toThrow(/^kvpool: no Wasm memory left for a snapshot of the events$/);
    // Snapshots keep a mirror as large again as the manager's arrays: refused, and nothing changes.
    expect(() => late.recordEvents(true, { snapshots: true })).toThrow(/^kvpool: no Wasm memory left to record events on a manager of 4096 blocks$/);
    expect(late.recordingEvents).toBe(false);
    // 2,000 stored records of 112 bytes need a log of 256 KiB: there is none.
    expect(lossy.cache(lossyTokens, lossyIds)).toBe(2000);
    expect(lossy.numBlocksInPrefixCache()).toBe(2000);
  } finally {
    for (const p of filler) rt.release(p);
  }

  expect(() => lossy.snapshotEvents()).toThrow(/^kvpool: KV-cache events were lost: drain them before taking a snapshot$/);
  expect(() => lossy.drainEvents()).toThrow(/^kvpool: KV-cache events were lost: Wasm memory ran out, or more than 1 GiB of records waited to be drained$/);
  // Said once: recording goes on from an empty log, and a snapshot tells a
  // consumer what the lost records would have (the blocks count as announced).
  expect(lossy.drainEvents()).toEqual([]);
  expect(idsOf(lossy.snapshotEvents()).sort((a, b) => a - b)).toEqual([...lossyIds].sort((a, b) => a - b));
  lossy.deallocate(lossyIds);
  expect(lossy.evict(1)).toBe(1);
  expect(lossy.drainEvents().map((e) => e.type)).toEqual(['removed']);
  lossy.check();

  // The refused snapshot lost nothing that was pending.
  expect(idsOf(pending.drainEvents())).toEqual([...pendingIds]);
  expect(pending.snapshotEvents().length).toBe(500);
  pending.check();
  late.recordEvents(true, { snapshots: true });
  expect(late.snapshotEvents()).toEqual([]);
  lossy.dispose();
  pending.dispose();
  late.dispose();
});
