// The typed-array tables under KVEventIndex against plain Maps: random
// stores, removals, waits and holds, many enough to grow every table several
// times and to delete from long probe runs (backward shifts across the wrap),
// with hashes drawn from a small range so that they collide and repeat.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeyHolders } from '../bindings/events/index-keys.js';
import { BlockSlots, HASH_NAME, HASH_U64, NO_PARENT, type SlotOwner } from '../bindings/events/index-slots.js';
import { soak } from './support/soak.js';

const owner = (id: number): SlotOwner => ({ id, head: -1, tail: -1, count: 0, waiting: 0 });

describe('BlockSlots', () => {
  it('finds, lists in stored order, and links waiting blocks as Maps do', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(2), fc.nat(3000), fc.nat(3000), fc.boolean()), { minLength: 4000, maxLength: 6000 }), (ops) => {
        const B = 2;
        const slots = new BlockSlots(B);
        const owners = [owner(0), owner(1), owner(2)];
        // Model: per owner, hash -> { parent, tokens } in stored order; waiting: parent -> set of hashes.
        const model = owners.map(() => new Map<string, { parent: number; slot: number; waits: boolean }>());
        const key = (form: number, lo: number) => `${form}:${lo}`;
        ops.forEach(([o, h, parent, wait], step) => {
          const s = owners[o]!;
          const m = model[o]!;
          const form = h % 7 === 0 ? HASH_NAME : HASH_U64;
          const k = key(form, h);
          const old = m.get(k);
          if (old !== undefined) {
            slots.remove(s, old.slot);
            m.delete(k);
            if (step % 3 === 0) return; // a removal alone
          }
          const pForm = wait ? HASH_U64 : NO_PARENT;
          const x = slots.add(s, form, h, h ^ 0x5555, pForm, parent, 7, [step, -step], 0, step % 11 === 0 ? ['salt'] : null);
          if (wait) slots.wait(s, x);
          m.set(k, { parent, slot: x, waits: wait });
          if (step % 5 === 0) {
            // Take whoever waits for `h` (as the index does when h gets its key).
            const got: number[] = [];
            slots.takeWaiting(s, HASH_U64, h, 7, got);
            const want = [...m.values()].filter((v) => v.waits && v.parent === h);
            expect(got.sort((a, b) => a - b)).toEqual(want.map((v) => v.slot).sort((a, b) => a - b));
            for (const v of want) v.waits = false;
          }
        });
        owners.forEach((s, o) => {
          const m = model[o]!;
          const listed: number[] = [];
          for (let x = s.head; x !== -1; x = slots.after(x)) listed.push(x);
          expect(listed).toEqual([...m.values()].map((v) => v.slot));
          expect(s.count).toBe(m.size);
          expect(s.waiting).toBe([...m.values()].filter((v) => v.waits).length);
          for (const [k, v] of m) {
            const [form, lo] = k.split(':').map(Number) as [number, number];
            expect(slots.find(o, form, lo, lo ^ 0x5555)).toBe(v.slot);
            expect(slots.find(o, form, lo, lo ^ 0x5554)).toBe(-1);
          }
        });
      }),
      { numRuns: soak(5) },
    );
  });
});

describe('KeyHolders', () => {
  it('holds each key for the set of sources that hold it, as a Map of Sets does', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(1500), fc.nat(3), fc.boolean()), { minLength: 5000, maxLength: 8000 }), (ops) => {
        const h = new KeyHolders();
        const model = new Map<number, Set<number>>();
        // Keys whose first word collides often (it is the table's hash).
        const words = (k: number) => Uint32Array.of(k & 0xff, k, k * 3, 0xffffffff - k);
        for (const [k, src, add] of ops) {
          const set = model.get(k) ?? new Set<number>();
          if (add) {
            h.hold(words(k), 0, src);
            set.add(src);
          } else {
            h.unhold(words(k), 0, src);
            set.delete(src);
          }
          if (set.size > 0) model.set(k, set);
          else model.delete(k);
        }
        for (let k = 0; k <= 1500; k++) {
          const e = h.find(words(k), 0);
          const got = new Set<number>();
          if (e !== -1) for (let x = h.firstHolder(e); x !== -1; x = h.nextHolder(x)) got.add(h.holderSource(x));
          expect(e === -1 ? undefined : got, `key ${k}`).toEqual(model.get(k));
        }
      }),
      { numRuns: soak(5) },
    );
  });
});
