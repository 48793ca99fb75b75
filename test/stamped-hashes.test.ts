// A pool with linear state stamps a prompt's block hashes at prefill (ranks/block-table-rank.ts)
// and its later insert takes them as known, staging only the tokens of the
// blocks after them (managers/core-manager.ts insertFrom). These tests pin
// what the stamps are, that an insert given stamps it cannot trust falls back
// to hashing, and that nothing the cache does changes.

import { describe, expect, it } from 'vitest';
import { ERR_FREE, ERR_OUT_OF_RANGE, ERR_PADDING } from '../bindings/core/abi.js';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { blockTokens } from './support/block-tokens.js';

const B = 4;
const hashAt = (tokens: number[], i: number) => [...hashBlocks(tokens, B).subarray(i * 16, i * 16 + 16)];

/** Prefill done: checkpoints at every boundary of `s`, as the replay's linear-state rule commits them (so later prompts keep their hits). */
function checkpoint(p: BlockManagerPool, s: Sequence): void {
  const full = Math.floor(s.numTokens / B);
  p.linearStateCache(s.dpRank).prefillBatch(s.prefixHashes(), s.sharedBlocks, full);
}

describe('hashes stamped at prefill', () => {
  it('a prefill stamps every full prompt block with its chain hash; cache() then caches the same keys', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B, enableLinearState: true, linearStateNumSlots: 16 });
    const kv = p.managers[0] as BlockManagerImpl;
    const a = blockTokens(B, 5, 100, 2); // 5 full blocks and 2 tokens
    const s = new Sequence(a);
    expect(p.allocate(s)).toBe(true);
    expect(s.numBlocks).toBe(6);
    for (let i = 0; i < 5; i++) expect([...kv.blockHash(s.blockAt(i))!]).toEqual(hashAt(a, i));
    expect(kv.blockHash(s.blockAt(5))).toBeNull(); // the partial block carries none
    expect(kv.numBlocksInPrefixCache()).toBe(0); // stamped, not cached
    checkpoint(p, s);
    const ids = [...s.blockTable];
    s.kvCachedTokens = s.numTokens;
    p.deallocate(s);
    p.check();
    expect(kv.numBlocksInPrefixCache()).toBe(5);
    for (let i = 0; i < 5; i++) expect([...kv.blockHash(ids[i]!)!]).toEqual(hashAt(a, i));
    // A second request with the same prompt finds all five blocks but the last (exact-prompt rule does not apply: 22 tokens).
    const t = new Sequence(a);
    expect(p.allocate(t)).toBe(true);
    expect(t.sharedBlocks).toBe(5);
    p.check();
  });

  it('a sequence that matched part of its prompt stamps the rest chained on the matched blocks', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B, enableLinearState: true, linearStateNumSlots: 16 });
    const kv = p.managers[0] as BlockManagerImpl;
    const base = blockTokens(B, 3, 100, 0);
    const s = new Sequence(base);
    expect(p.allocate(s)).toBe(true);
    checkpoint(p, s);
    s.kvCachedTokens = s.numTokens;
    p.deallocate(s);
    const longer = [...base, ...blockTokens(B, 2, 500, 1)];
    const t = new Sequence(longer);
    expect(p.allocate(t)).toBe(true);
    expect(t.sharedBlocks).toBe(3);
    for (let i = 0; i < 5; i++) expect([...kv.blockHash(t.blockAt(i))!]).toEqual(hashAt(longer, i));
    p.check();
  });

  it('with a cache salt the stamps chain on the salt, as the keys cache() makes', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B, enableLinearState: true, linearStateNumSlots: 16 });
    const a = blockTokens(B, 3, 100, 0);
    const s = new Sequence(a, { cacheSalt: 'tenant' });
    expect(p.allocate(s)).toBe(true);
    checkpoint(p, s);
    s.kvCachedTokens = s.numTokens;
    p.deallocate(s);
    // The same salt hits (its keys are the stamped ones); no salt and another salt miss.
    const hits = (salt?: string) => {
      const q = new Sequence([...a, 1], salt === undefined ? undefined : { cacheSalt: salt });
      expect(p.allocate(q)).toBe(true);
      const n = q.sharedBlocks;
      p.deallocateWithoutCache(q);
      return n;
    };
    expect([hits('tenant'), hits(), hits('other')]).toEqual([3, 0, 0]);
    p.check();
  });
});

describe('insert with known blocks', () => {
  it('hashes a known block that carries no stamp instead of trusting it', () => {
    const mk = () => new BlockManagerImpl({ numBlocks: 16, blockSize: B });
    const tokens = blockTokens(B, 4, 7, 0);
    const a = mk();
    const b = mk();
    const ia = a.allocate(4)!;
    const ib = b.allocate(4)!;
    // Nothing is stamped: claiming 3 known blocks must still cache the right keys.
    expect(a.insertFrom(tokens, ia, 0, 4, 0, null, 3)).toBe(4);
    expect(b.insertFrom(tokens, ib, 0, 4, 0, null, 0)).toBe(4);
    for (let i = 0; i < 4; i++) expect([...a.blockHash(ia[i]!)!]).toEqual([...b.blockHash(ib[i]!)!]);
    expect([...a.blockHash(ia[3]!)!]).toEqual(hashAt(tokens, 3));
    a.check();
  });

  it('stamps only held blocks and leaves cached ones and an invalid list alone', () => {
    const m = new BlockManagerImpl({ numBlocks: 16, blockSize: B });
    const tokens = blockTokens(B, 3, 7, 0);
    const ids = m.allocate(3)!;
    expect(m.stampChainFrom(tokens, ids, 0, 3, 0)).toBe(0);
    for (let i = 0; i < 3; i++) expect([...m.blockHash(ids[i]!)!]).toEqual(hashAt(tokens, i));
    // A free id in the list: an error, and the held ones before it are not re-stamped.
    const other = blockTokens(B, 3, 900, 0);
    m.deallocate([ids[2]!]);
    expect(m.stampChainFrom(other, ids, 0, 3, 0)).toBe(ERR_FREE);
    // The padding id, or one out of range (either side), is refused as such.
    for (const [bad, code] of [[0, ERR_PADDING], [16, ERR_OUT_OF_RANGE], [-1, ERR_OUT_OF_RANGE]] as const) {
      expect(m.stampChainFrom(other, [ids[0]!, bad], 0, 2, 0)).toBe(code);
    }
    expect([...m.blockHash(ids[0]!)!]).toEqual(hashAt(tokens, 0));
    m.check();
  });
});
