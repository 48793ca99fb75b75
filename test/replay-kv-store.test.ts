// The replay's KV-cache store (bindings/replay/kv-store.ts) against a plain
// least-recently-used set (a Map, insertion order as recency): random
// writes and prefetches over few hashes, many of them sharing a home slot,
// must give the same deliveries, figures and contents after every step.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReplayKvStore } from '../bindings/replay/kv-store.js';
import { soak } from './support/soak.js';

/** The reference: a Map whose insertion order is the recency order. */
class MapStore {
  readonly held = new Map<string, Uint8Array>();
  written = 0;
  requested = 0;
  delivered = 0;
  evicted = 0;
  constructor(readonly capacity: number) {}
  write(h: Uint8Array): void {
    const k = h.join(',');
    this.written++;
    if (!this.held.delete(k) && this.held.size >= this.capacity) {
      this.held.delete(this.held.keys().next().value!);
      this.evicted++;
    }
    this.held.set(k, h);
  }
  deliver(hs: readonly { hash: Uint8Array }[]): number {
    this.requested += hs.length;
    let n = 0;
    for (; n < hs.length; n++) {
      const k = hs[n]!.hash.join(',');
      const h = this.held.get(k);
      if (h === undefined) break;
      this.held.delete(k);
      this.held.set(k, h);
    }
    this.delivered += n;
    return n;
  }
}

/** Hash `i`: its first word takes 4 values only (so homes collide and probe runs wrap), the rest tell hashes apart. */
function hash(i: number): Uint8Array {
  const h = new Uint8Array(16);
  const v = new DataView(h.buffer);
  v.setUint32(0, (i % 4) * 0x9e3779b1 + (i % 4 === 3 ? 0xffffffff : 0), true);
  v.setUint32(4, i, true);
  v.setUint32(12, i * 7, true);
  return h;
}

type Op = { kind: 'write'; h: number } | { kind: 'writeAll'; hs: number[] } | { kind: 'deliver'; hs: number[] };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('write' as const), h: fc.nat({ max: 23 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('writeAll' as const), hs: fc.array(fc.nat({ max: 23 }), { maxLength: 6 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('deliver' as const), hs: fc.array(fc.nat({ max: 23 }), { maxLength: 6 }) }) },
);

describe('replay KV-cache store', () => {
  it('keeps what a least-recently-used set keeps, in the same order', () => {
    let evictions = 0;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.array(opArb, { maxLength: 200 }), (capacity, ops) => {
        const store = new ReplayKvStore(capacity);
        const ref = new MapStore(capacity);
        for (const op of ops) {
          if (op.kind === 'write') {
            store.write(hash(op.h));
            ref.write(hash(op.h));
          } else if (op.kind === 'writeAll') {
            // One buffer of hashes, written in order (the offloads of one plan).
            const all = new Uint8Array(op.hs.length * 16);
            op.hs.forEach((i, k) => all.set(hash(i), k * 16));
            store.writeAll(all);
            for (const i of op.hs) ref.write(hash(i));
          } else {
            const all = new Uint8Array(op.hs.length * 16);
            op.hs.forEach((i, k) => all.set(hash(i), k * 16));
            expect(store.deliver(all)).toBe(ref.deliver(op.hs.map((i) => ({ hash: hash(i) }))));
          }
          expect(store.contents().map((h) => h.join(','))).toEqual([...ref.held.keys()]);
          expect(store.result()).toEqual({
            storeBlocks: capacity,
            blocksWritten: ref.written,
            blocksRequested: ref.requested,
            blocksDelivered: ref.delivered,
            blocksEvicted: ref.evicted,
            blocksAtEnd: ref.held.size,
          });
        }
        evictions += ref.evicted;
      }),
      { numRuns: soak(300) },
    );
    expect(evictions).toBeGreaterThan(0);
  });
});
