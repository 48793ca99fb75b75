// The sealed boundary between the bindings and linear memory: every object
// knows when it was disposed and says so on every call; sizes are checked
// before anything is staged; descriptors are validated against the core; the
// ABI has one source. Each finding of the sealed-core review has a case here.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import * as ABI from '../bindings/core/abi.js';
import { CHECK_MESSAGES, STAT_FIELDS } from '../bindings/core/abi-names.js';
import { plainCore } from '../bindings/core/plain-core.js';
import { sharedCore } from '../bindings/core/shared-core.js';
import { hashBlocks, xxh3_128 } from '../bindings/hash.js';
import { LinearStatePrefixCache } from '../bindings/linear-state/linear-state-prefix-cache.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { FULL_ATTENTION_GROUP } from '../bindings/managers/kv-events.js';
import { CompositeBlockManager } from '../bindings/managers/composite-block-manager.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';
import { SingleBlockManager } from '../bindings/managers/single-block-manager.js';
import { SlidingWindowBlockManager } from '../bindings/managers/sliding-window-block-manager.js';
import { XTensorBlockManagerImpl } from '../bindings/managers/xtensor-block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { promptTokens } from '../bindings/replay/kernel.js';
import { parseTraceLine } from '../bindings/replay/trace.js';

interface Disposable {
  dispose(): void;
}

/**
 * The members of every class in bindings/ that are not public API (private,
 * protected, or marked @internal), read from the sources with the TypeScript
 * compiler: "ClassName.member".
 */
function nonPublicMembers(): Set<string> {
  const out = new Set<string>();
  const root = fileURLToPath(new URL('../bindings/', import.meta.url));
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  for (const f of files) {
    const src = ts.createSourceFile(f, readFileSync(join(root, f), 'utf8'), ts.ScriptTarget.ES2022, true);
    src.forEachChild(function visit(node): void {
      if (ts.isClassDeclaration(node) && node.name) {
        for (const m of node.members) {
          if (!m.name || !ts.isIdentifier(m.name)) continue;
          const mods = ts.canHaveModifiers(m) ? (ts.getModifiers(m) ?? []) : [];
          const hidden = mods.some((x) => x.kind === ts.SyntaxKind.PrivateKeyword || x.kind === ts.SyntaxKind.ProtectedKeyword);
          const internal = ts.getJSDocTags(m).some((t) => t.tagName.text === 'internal');
          if (hidden || internal) out.add(`${node.name.text}.${m.name.text}`);
        }
      }
      node.forEachChild(visit);
    });
  }
  return out;
}

const HIDDEN = nonPublicMembers();

/** Every public method and accessor reachable on `obj`'s prototype chain, but dispose itself. */
function surface(obj: object): { methods: string[]; getters: string[] } {
  const methods = new Set<string>();
  const getters = new Set<string>();
  for (let p = Object.getPrototypeOf(obj); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    const cls = (p as { constructor: { name: string } }).constructor.name;
    for (const [k, d] of Object.entries(Object.getOwnPropertyDescriptors(p))) {
      if (k === 'constructor' || k === 'dispose' || k === 'isDisposed' || HIDDEN.has(`${cls}.${k}`)) continue;
      if (typeof d.value === 'function') methods.add(k);
      else if (d.get) getters.add(k);
    }
  }
  return { methods: [...methods], getters: [...getters] };
}

const MAKERS: Record<string, () => Disposable> = {
  BlockManagerImpl: () => new BlockManagerImpl({ numBlocks: 8, blockSize: 2 }),
  'BlockManagerImpl (priority)': () => new BlockManagerImpl({ numBlocks: 8, blockSize: 2, evictionPolicy: 'priority' }),
  SingleBlockManager: () => new SingleBlockManager({ numBlocks: 8 }),
  SlidingWindowBlockManager: () => new SlidingWindowBlockManager({ numBlocks: 8, blockSize: 2, slidingWindowSize: 4 }),
  ConcurrentBlockManagerImpl: () => new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 }),
  'ConcurrentBlockManagerImpl (attached)': () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const view = ConcurrentBlockManagerImpl.attach(m.share());
    return { dispose: () => (view.dispose(), m.dispose()), view } as unknown as Disposable;
  },
  CompositeBlockManager: () => new CompositeBlockManager({ blockSize: 2, numBlocks: 16, managerTypes: ['sliding-window', 'full'], slidingWindowSize: 4 }),
  XTensorBlockManagerImpl: () => new XTensorBlockManagerImpl({ numBlocks: 10, blockSize: 4, pageSize: 10, blockBytes: 5, numLayers: 1 }),
  LinearStatePrefixCache: () => new LinearStatePrefixCache({ numSlots: 4 }),
  BlockManagerPool: () => new BlockManagerPool({ numBlocks: 8, blockSize: 2, dpSize: 2 }),
  'BlockManagerPool (composite)': () => new BlockManagerPool({ numBlocks: 16, blockSize: 2, managerTypes: ['sliding-window', 'full'], slidingWindowSize: 4 }),
  'BlockManagerPool (linear state)': () => new BlockManagerPool({ numBlocks: 8, blockSize: 2, enableLinearState: true, linearStateNumSlots: 4 }),
  'BlockManagerPool (XTensor)': () => new BlockManagerPool({ numBlocks: 8, blockSize: 2, enableXtensor: true, numLayers: 1, slotSize: 2, pageSize: 12 }),
  'BlockManagerPool (disaggregated)': () => new BlockManagerPool({ numBlocks: 8, blockSize: 2, enableDisaggPd: true }),
  HierarchyBlockManagerPool: () => new HierarchyBlockManagerPool({ numBlocks: 8, blockSize: 2, hostNumBlocks: 8 }),
};

describe('use after dispose', () => {
  for (const [name, make] of Object.entries(MAKERS)) {
    it(`${name}: every method and accessor throws "disposed", whatever its arguments`, () => {
      const made = make();
      const obj = ((made as unknown as { view?: object }).view ?? made) as Record<string, unknown>;
      made.dispose();
      expect(obj['isDisposed']).toBe(true);
      const { methods, getters } = surface(obj);
      expect(methods.length).toBeGreaterThan(3);
      for (const k of methods) {
        expect(() => (obj[k] as (...a: unknown[]) => unknown).call(obj), `${name}.${k}()`).toThrow(/was disposed/);
        expect(() => (obj[k] as (...a: unknown[]) => unknown).call(obj, 1, [1], 1), `${name}.${k}(1, [1], 1)`).toThrow(/was disposed/);
      }
      for (const k of getters) expect(() => obj[k], `${name}.${k}`).toThrow(/was disposed/);
      made.dispose(); // a second dispose is harmless
    });
  }

  it('a disposed pool cannot reach the live pool that reuses its memory (its single id, its cache entries)', () => {
    const a = new BlockManagerPool({ numBlocks: 8, blockSize: 2 });
    const sa = new Sequence([1, 2, 3, 4, 5]);
    expect(a.allocate(sa)).toBe(true);
    a.dispose();
    const b = new BlockManagerPool({ numBlocks: 8, blockSize: 2 });
    const sb = new Sequence([1, 2, 3, 4, 5]);
    expect(b.allocate(sb)).toBe(true);
    const before = { stats: b.stats(), single: sb.singleBlockId, table: [...sb.blockTable] };
    expect(() => a.deallocate(sa)).toThrow(/BlockManagerPool was disposed/);
    expect(() => a.allocate(new Sequence([7, 8, 9]))).toThrow(/BlockManagerPool was disposed/);
    expect({ stats: b.stats(), single: sb.singleBlockId, table: [...sb.blockTable] }).toEqual(before);
    b.check();
    b.dispose();
  });

  it('a core call that takes two managers refuses one of another core instance, or a disposed one', () => {
    const plain = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const shared = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const other = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    expect(() => plain.sameCore(shared, 'the KV manager')).toThrow(new TypeError('kvpool: the KV manager belongs to another core instance than this BlockManagerImpl'));
    plain.sameCore(other, 'the KV manager');
    other.dispose();
    expect(() => plain.sameCore(other, 'the KV manager')).toThrow(/^kvpool: this BlockManagerImpl was disposed/);
    expect(() => other.sameCore(plain, 'the KV manager')).toThrow(/^kvpool: this BlockManagerImpl was disposed/);
    shared.dispose();
    plain.dispose();
  });

  it('disposing a manager again does not destroy the neighbour that reuses its memory', () => {
    const a = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const ptr = (a as unknown as { ptr: number }).ptr;
    a.dispose();
    const b = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    expect((b as unknown as { ptr: number }).ptr).toBe(ptr); // the same header: what the test is about
    const ids = b.allocate(3)!;
    a.dispose();
    b.check();
    expect(b.numUsedBlocks()).toBe(3);
    b.deallocate(ids);
    b.dispose();
  });

  it("a disposed BlockManagerImpl's counters do not report the neighbour's numbers", () => {
    const a = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    a.dispose();
    const b = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    b.allocate(3);
    for (const f of [() => a.numFreeBlocks(), () => a.numUsedBlocks(), () => a.numBlocksInPrefixCache(), () => a.kvCacheUtilization()]) {
      expect(f).toThrow(/BlockManagerImpl was disposed/);
    }
    expect(b.numUsedBlocks()).toBe(3);
    b.dispose();
  });

  it("a disposed LinearStatePrefixCache's acquireLiveSlot does not take a neighbour's slot", () => {
    const a = new LinearStatePrefixCache({ numSlots: 4 });
    a.dispose();
    const b = new LinearStatePrefixCache({ numSlots: 4 });
    expect(() => a.acquireLiveSlot()).toThrow(/LinearStatePrefixCache was disposed|SlotCore was disposed/);
    expect(b.numFreeSlots()).toBe(3);
    b.check();
    b.dispose();
  });
});

describe('sizes are checked before anything is staged', () => {
  const inUse = () => (plainCore().ex.heapTop() >>> 0) - plainCore().ex.heapFreeBytes();

  it('allocate of 2^30 or 2^28 ids answers null and stages nothing; a later pool audits clean', () => {
    const m = new BlockManagerImpl({ numBlocks: 64, blockSize: 4 });
    m.deallocate(m.allocate(3)!);
    const before = inUse();
    expect(m.allocate(2 ** 30)).toBeNull();
    expect(m.allocate(2 ** 28)).toBeNull();
    expect(inUse()).toBe(before); // no 1 GiB staging area kept
    expect(m.stats().allocationFailures).toBe(2);
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: 2 });
    expect(p.allocate(new Sequence([1, 2, 3]))).toBe(true);
    p.check();
    m.check();
    p.dispose();
    m.dispose();
  });

  it('an impossible allocation still evicts what it can, as a failed allocation does', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: 1 });
    const ids = m.allocate(4)!;
    m.cache([1, 2, 3, 4], ids);
    m.deallocate(ids);
    expect(m.numBlocksInPrefixCache()).toBe(4);
    expect(m.allocate(2 ** 30)).toBeNull();
    expect(m.numBlocksInPrefixCache()).toBe(0);
    expect(m.numFreeBlocks()).toBe(7);
    m.check();
    m.dispose();
  });

  it('pool.allocate(seq, 2^30) at block size 1 is false, and the pool is whole', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: 1 });
    const s = new Sequence([1, 2, 3]);
    expect(p.allocate(s)).toBe(true);
    const before = inUse();
    expect(p.allocate(s, 2 ** 30)).toBe(false);
    expect(inUse()).toBe(before);
    expect(s.numBlocks).toBe(3);
    p.check();
    p.dispose();
  });

  it('promptTokens refuses a prompt past the core before allocating, and hashing afterwards is intact', () => {
    const h = xxh3_128(new Uint8Array(50_000).fill(7));
    expect(() => promptTokens({ inputLength: 2 ** 30 + 512, outputLength: 0, hashIds: new Int32Array(2 ** 21 + 1) })).toThrow(
      /req.inputLength must be in \[0, 268435456\], got 1073742336/,
    );
    expect(xxh3_128(new Uint8Array(50_000).fill(7))).toEqual(h);
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: 2 });
    p.check();
    p.dispose();
  });

  it('counts past int32 and array-likes with a bad length are explained', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    expect(() => m.allocate(2 ** 31)).toThrow(/n must be at most 2147483647 \(int32\), got 2147483648/);
    expect(() => new Sequence({ length: -1 } as never)).toThrow(/length must be a non-negative integer, got -1/);
    expect(() => m.deallocate({ length: 1.5 } as never)).toThrow(/length must be a non-negative integer/);
    m.check();
    m.dispose();
  });

  it('a trace line too long for the core is rejected with its line number before anything is sized by it', () => {
    const line = (input: number, output = 1) => JSON.stringify({ timestamp: 0, input_length: input, output_length: output, hash_ids: [1] });
    expect(() => parseTraceLine(line(2147483647), 7)).toThrow(/trace line 7: input_length \+ output_length = 2147483648 is more than a sequence can hold/);
    expect(() => parseTraceLine(line(1e9), 8)).toThrow(/trace line 8: .* more than a sequence can hold \(268435456 tokens\)/);
    expect(() => parseTraceLine(line(100, 2 ** 28), 9)).toThrow(/trace line 9/);
  });

  it('a staging request the 32-bit core can never hold is a RangeError, not a wrapped size', () => {
    const st = plainCore().staging;
    expect(() => st.byteSpace(2 ** 32 + 16)).toThrow(/cannot stage 4294967312 bytes of bytes in Wasm memory/);
    expect(() => st.idSpace(2 ** 30)).toThrow(/cannot stage .* block ids/);
    expect(plainCore().alloc(2 ** 32 + 16)).toBe(0); // refused before it reaches the core's u32 parameter
  });
});

describe('the region allocator gives memory back at any size', () => {
  it('a disposed manager\'s memory is reused by smaller and larger managers without growing the top', () => {
    const ex = plainCore().ex;
    const big = new BlockManagerImpl({ numBlocks: 200_000, blockSize: 16 });
    const top = ex.heapTop() >>> 0;
    big.dispose();
    const parts = [1, 2, 3].map(() => new BlockManagerImpl({ numBlocks: 60_000, blockSize: 16 }));
    expect(ex.heapTop() >>> 0).toBeLessThanOrEqual(top);
    for (const m of parts) m.dispose();
    const again = new BlockManagerImpl({ numBlocks: 200_000, blockSize: 16 });
    expect(ex.heapTop() >>> 0).toBeLessThanOrEqual(top);
    again.check();
    again.dispose();
  });

  it('a pool that cannot fit 4 GiB is refused before it grows the memory, and the next pool is fine', () => {
    const ex = plainCore().ex;
    const topBefore = ex.heapTop() >>> 0;
    const pagesBefore = plainCore().memory.buffer.byteLength;
    expect(() => new BlockManagerPool({ numBlocks: 1_000_000, blockSize: 16, dpSize: 110 })).toThrow(
      /a pool of 110 rank\(s\) of 1000000 blocks needs 5\.\d\d GiB of Wasm memory; a 32-bit core holds at most 4 GiB/,
    );
    expect(ex.heapTop() >>> 0).toBe(topBefore);
    expect(plainCore().memory.buffer.byteLength).toBe(pagesBefore);
    const p = new BlockManagerPool({ numBlocks: 64, blockSize: 2 });
    expect(p.allocate(new Sequence([1, 2, 3]))).toBe(true);
    p.check();
    p.dispose();
  });
});

describe('one ABI', () => {
  it('both builds agree with bindings/core/abi.ts on the header layout', () => {
    expect(plainCore().ex.abi_check()).toBe(0);
    expect(sharedCore().ex.abi_check()).toBe(0);
  });

  it('every audit code has a message and every stats field its index', () => {
    const checks = Object.entries(ABI).filter(([k]) => k.startsWith('CHECK_')).map(([, v]) => v as number);
    expect(checks.length).toBeGreaterThan(10);
    for (const c of checks) expect(CHECK_MESSAGES[c], `code ${c}`).toBeTypeOf('string');
    expect(STAT_FIELDS.length).toBe(ABI.STAT_COUNT);
    expect(STAT_FIELDS[ABI.STAT_BLOCKS_EVICTED]).toBe('blocksEvicted');
  });

  it('the stats the core writes land in the fields of their names', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: 1 });
    const ids = m.allocate(3)!;
    m.cache([5, 6, 7], ids);
    m.deallocate(ids);
    expect(m.evict(2)).toBe(2);
    expect(m.allocate(100)).toBeNull();
    const s = m.stats();
    expect(s).toMatchObject({ numTotalBlocks: 7, blocksAllocated: 3, blocksInserted: 3, blocksEvicted: 3, allocationFailures: 1, numBlocksInPrefixCache: 0, peakUsedBlocks: 3 });
    m.dispose();
  });

  it('event records decode with the shared layout (hash and parent at their offsets)', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    m.recordEvents(true);
    const ids = m.allocate(2)!;
    m.cache([1, 2, 3, 4], ids);
    const ev = m.drainEvents();
    const h = hashBlocks([1, 2, 3, 4], 2);
    expect(ev).toEqual([
      { type: 'stored', dpRank: 0, blockId: ids[0], hash: h.slice(0, 16), parentHash: null, tokenIds: Int32Array.from([1, 2]), salt: null, medium: 'GPU', group: FULL_ATTENTION_GROUP },
      { type: 'stored', dpRank: 0, blockId: ids[1], hash: h.slice(16, 32), parentHash: h.slice(0, 16), tokenIds: Int32Array.from([3, 4]), salt: null, medium: 'GPU', group: FULL_ATTENTION_GROUP },
    ]);
    m.dispose();
  });
});

describe('descriptors are validated against the shared memory', () => {
  it("a forged descriptor (another manager's header, a stale generation, an odd address, an extra lock pointer) is refused", () => {
    const a = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const b = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const da = a.share();
    const refused = /does not name a live manager of this shared memory/;
    expect(() => ConcurrentBlockManagerImpl.attach({ ...da, ptr: b.ptr })).toThrow(refused);
    expect(() => ConcurrentBlockManagerImpl.attach({ ...da, gen: da.gen + 1 })).toThrow(refused);
    expect(() => ConcurrentBlockManagerImpl.attach({ ...da, ptr: da.ptr + 16 })).toThrow(refused);
    expect(() => ConcurrentBlockManagerImpl.attach({ ...da, lockPtr: da.ptr } as never)).toThrow(/unknown option "lockPtr"/);
    // The real thing attaches, and sees a's shape from the memory, not from the descriptor.
    const view = ConcurrentBlockManagerImpl.attach(da);
    expect([view.numBlocks, view.blockSize]).toEqual([8, 2]);
    view.dispose();
    a.dispose();
    // Once disposed, its descriptor is refused, even when a new manager took its header slot.
    const c = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    expect(c.ptr).toBe(da.ptr);
    expect(() => ConcurrentBlockManagerImpl.attach(da)).toThrow(refused);
    b.check();
    c.check();
    b.dispose();
    c.dispose();
  });
});

describe('events of a concurrent manager', () => {
  type Op = ['allocate', number] | ['cache', number[], number] | ['release', number] | ['evict', number];
  const OPS: Op[] = [
    ['allocate', 3], ['cache', [1, 2, 3, 4, 5, 6], 0], ['allocate', 2], ['cache', [1, 2, 9, 9], 1],
    ['release', 0], ['release', 0], ['evict', 2], ['allocate', 5], ['release', 0], ['evict', 10],
  ];

  /** Runs OPS on `m` (block size 2), recording events; returns them. */
  function drive(m: BlockManagerImpl): unknown[] {
    m.recordEvents(true);
    const batches: Int32Array[] = [];
    for (const op of OPS) {
      if (op[0] === 'allocate') {
        const a = m.allocate(op[1]);
        if (a) batches.push(a);
      } else if (op[0] === 'cache') m.cache(op[1], batches[op[2]]!.slice(0, op[1].length / 2));
      else if (op[0] === 'release') m.deallocate(batches.splice(op[1], 1)[0]!);
      else m.evict(op[1]);
    }
    return m.drainEvents(0);
  }

  it('drained on this thread, they equal the plain manager\'s for the same operations', () => {
    const plain = new BlockManagerImpl({ numBlocks: 12, blockSize: 2 });
    const shared = new ConcurrentBlockManagerImpl({ numBlocks: 12, blockSize: 2 });
    const a = drive(plain);
    expect(a.length).toBeGreaterThan(4);
    expect(drive(shared)).toEqual(a);
    plain.dispose();
    shared.dispose();
  });

  it('drained in a worker, they equal the plain manager\'s for the same operations', async () => {
    const plain = new BlockManagerImpl({ numBlocks: 12, blockSize: 2 });
    const want = drive(plain);
    plain.dispose();
    const shared = new ConcurrentBlockManagerImpl({ numBlocks: 12, blockSize: 2 });
    // Grow the shared memory first so that the worker's instance sees a
    // memory larger than its module's initial size.
    const ballast = new ConcurrentBlockManagerImpl({ numBlocks: 300_000, blockSize: 2 });
    const w = new Worker(new URL('./support/ts-worker.mjs', import.meta.url), {
      workerData: { entry: new URL('./support/events-worker.ts', import.meta.url).href, desc: shared.share(), ops: OPS },
    });
    try {
      const got = await new Promise<unknown>((res, rej) => {
        w.once('message', res);
        w.once('error', rej);
      });
      expect(got).toEqual(want);
    } finally {
      await w.terminate();
      ballast.dispose();
      shared.dispose();
    }
  });
});
