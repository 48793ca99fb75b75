// A host tier's load plan stamps the host blocks' hashes on the device blocks
// they are copied into (CoreManager.stampLoadedInto, core mgr_stamp_loaded),
// so caching those device blocks later takes the keys as known instead of
// hashing their tokens. These tests pin what is stamped, what is left alone,
// and that a refused call changes nothing.

import { describe, expect, it } from 'vitest';
import { ERR_NOT_HELD, ERR_OUT_OF_RANGE, ERR_PADDING } from '../bindings/core/abi.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';

const B = 4;

/** Distinct 16-byte keys, one per block. */
function keys(from: number, n: number): Uint8Array {
  const out = new Uint8Array(n * 16);
  const v = new DataView(out.buffer);
  for (let i = 0; i < n; i++) for (let w = 0; w < 4; w++) v.setUint32(i * 16 + w * 4, Math.imul(from + i, 0x9e3779b1) ^ (w * 0x85ebca6b), true);
  return out;
}

/** The hash stamped on `id` (null when none). */
function stampOf(m: BlockManagerImpl, id: number): number[] | null {
  const out = new Uint8Array(16);
  return m.blockHashInto(id, out, 0) ? [...out] : null;
}

/** A host manager holding four cached blocks under keys(1, 4), and a device manager with four fresh blocks. */
function setup() {
  const host = new BlockManagerImpl({ numBlocks: 16, blockSize: B });
  const device = new BlockManagerImpl({ numBlocks: 16, blockSize: B });
  const hostIds = host.allocate(4)!;
  expect(host.insertHashesFrom(Int32Array.from(hostIds), 0, 4, keys(1, 4), 0)).toBe(4);
  const devIds = device.allocate(4)!;
  return { host, device, hostIds, devIds };
}

describe('stampLoadedInto', () => {
  it('copies each host hash to the plan and onto its device block, which insert then caches under it', () => {
    const { host, device, hostIds, devIds } = setup();
    const out = new Uint8Array(16 * 6).fill(0xee);
    expect(device.stampLoadedInto(host, hostIds, devIds, 0, 4, out, 1)).toBe(4);
    expect([...out.subarray(16, 80)]).toEqual([...keys(1, 4)]);
    expect([...out.subarray(0, 16)]).toEqual(new Array(16).fill(0xee)); // before `at`: untouched
    for (let i = 0; i < 4; i++) expect(stampOf(device, devIds[i]!)).toEqual([...keys(1 + i, 1)]);
    // Caching them with the stamps as known keys: tokens that would hash otherwise are not read.
    expect(device.insertFrom(new Int32Array(4 * B).fill(7), devIds, 0, 4, 0, null, 4)).toBe(4);
    // The same keys inserted by hash find those entries: nothing new is cached.
    const again = device.allocate(4)!;
    expect(device.insertHashesFrom(Int32Array.from(again), 0, 4, keys(1, 4), 0)).toBe(0);
    device.check();
    host.check();
  });

  it('leaves a cached device block its own key, and counts only the leading blocks stamped', () => {
    const { host, device, hostIds, devIds } = setup();
    // Device block 1 is cached under another key.
    expect(device.insertHashesFrom(Int32Array.from(devIds), 1, 2, keys(50, 1), 0)).toBe(1);
    const out = new Uint8Array(16 * 4);
    expect(device.stampLoadedInto(host, hostIds, devIds, 0, 4, out, 0)).toBe(1);
    expect([...out]).toEqual([...keys(1, 4)]); // the plan still gets every host hash
    expect(stampOf(device, devIds[0]!)).toEqual([...keys(1, 1)]);
    expect(stampOf(device, devIds[1]!)).toEqual([...keys(50, 1)]);
    expect(stampOf(device, devIds[2]!)).toEqual([...keys(3, 1)]);
    // A host block with no hash stamps nothing either.
    const bare = host.allocate(1)!;
    const d = device.allocate(1)!;
    expect(device.stampLoadedInto(host, bare, d, 0, 1, out, 0)).toBe(0);
    expect([...out.subarray(0, 16)]).toEqual(new Array(16).fill(0));
    expect(stampOf(device, d[0]!)).toBeNull();
    device.check();
  });

  it('refuses an id out of range, the padding id or a device block nothing holds, and changes nothing', () => {
    const { host, device, hostIds, devIds } = setup();
    const free = device.allocate(1)!;
    device.deallocate(free);
    const cases: Array<[Int32Array, Int32Array, number]> = [
      [Int32Array.from([hostIds[0]!, 0]), devIds, ERR_PADDING],
      [Int32Array.from([hostIds[0]!, 16]), devIds, ERR_OUT_OF_RANGE],
      [Int32Array.from([hostIds[0]!, -1]), devIds, ERR_OUT_OF_RANGE],
      [hostIds, Int32Array.from([devIds[0]!, 0]), ERR_PADDING],
      [hostIds, Int32Array.from([devIds[0]!, 99]), ERR_OUT_OF_RANGE],
      [hostIds, Int32Array.from([devIds[0]!, free[0]!]), ERR_NOT_HELD],
    ];
    for (const [src, dst, code] of cases) {
      const out = new Uint8Array(32).fill(0xee);
      expect(device.stampLoadedInto(host, src, dst, 0, 2, out, 0)).toBe(code);
      expect([...out]).toEqual(new Array(32).fill(0xee));
      for (const id of devIds) expect(stampOf(device, id)).toBeNull();
    }
    device.check();
    host.check();
  });

  it('refuses a host manager of another core instance, or a disposed one', () => {
    const { host, device, hostIds, devIds } = setup();
    const shared = new ConcurrentBlockManagerImpl({ numBlocks: 16, blockSize: B });
    const out = new Uint8Array(64);
    expect(() => device.stampLoadedInto(shared as unknown as BlockManagerImpl, hostIds, devIds, 0, 4, out, 0)).toThrow(/belongs to another core instance/);
    host.dispose();
    expect(() => device.stampLoadedInto(host, hostIds, devIds, 0, 4, out, 0)).toThrow(/was disposed/);
    for (const id of devIds) expect(stampOf(device, id)).toBeNull();
    shared.dispose();
    device.dispose();
  });
});
