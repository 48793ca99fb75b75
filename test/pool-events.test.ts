// Recording is switched on every rank together: when a rank cannot start
// (in practice only out of Wasm memory, which test/big-memory.test.ts
// reaches), the ranks before it are switched back off, so a failed
// recordEvents leaves the pool as it was. Ranks stand in here that refuse
// on demand, to reach that path without exhausting memory.

import { describe, expect, it } from 'vitest';
import { recordOnRanks } from '../bindings/pool/pool-events.js';
import type { RankManager } from '../bindings/ranks/rank-manager.js';

function ranks(n: number, refuses: number): { list: RankManager[]; on: boolean[]; calls: string[] } {
  const on = new Array<boolean>(n).fill(false);
  const calls: string[] = [];
  const list = on.map((_, i) => ({
    recordEvents(v: boolean) {
      calls.push(`${i}:${v}`);
      if (v && i === refuses) throw new RangeError(`rank ${i} is out of memory`);
      on[i] = v;
    },
  })) as unknown as RankManager[];
  return { list, on, calls };
}

describe('recordOnRanks', () => {
  it('switches every rank on, and off', () => {
    const r = ranks(3, -1);
    recordOnRanks(r.list, true);
    expect(r.on).toEqual([true, true, true]);
    recordOnRanks(r.list, false);
    expect(r.on).toEqual([false, false, false]);
    expect(r.calls).toEqual(['0:true', '1:true', '2:true', '0:false', '1:false', '2:false']);
  });

  it('switches the ranks before one that cannot start back off, and rethrows its error', () => {
    const r = ranks(4, 2);
    expect(() => recordOnRanks(r.list, true)).toThrow(/^rank 2 is out of memory$/);
    expect(r.on).toEqual([false, false, false, false]);
    // Rank 3 is never asked; only ranks 0 and 1, which had started, are stopped.
    expect(r.calls).toEqual(['0:true', '1:true', '2:true', '0:false', '1:false']);
  });

  it('a rank that fails while stopping stops the call without switching any rank on', () => {
    const r = ranks(2, -1);
    recordOnRanks(r.list, true);
    r.list[1]!.recordEvents = () => {
      throw new Error('cannot stop');
    };
    expect(() => recordOnRanks(r.list, false)).toThrow(/^cannot stop$/);
    expect(r.on).toEqual([false, true]);
    expect(r.calls).toEqual(['0:true', '1:true', '0:false']);
  });
});
