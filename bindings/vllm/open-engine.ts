// A vLLM engine built from parsed options (docs/engines.md): one KV-cache
// manager per dp rank (sharing one id checksum when there are several, so
// that it folds every rank's ids in the order they were popped) and the
// engine stepping them in lockstep. The replay and a fleet's engines are
// built here alike.

import { checkInt, checkObject } from '../validate.js';
import { VllmEngine } from './engine.js';
import { VllmKvCacheManager } from './kv-cache-manager.js';
import { checkVllmSchedulerConfig } from './scheduler.js';

/** What an engine is built from (ParsedVllmReplayOptions has it all). */
export interface VllmEngineSpec {
  numBlocks: number;
  blockSize: number;
  seed: number;
  dpSize: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  longPrefillTokenThreshold: number;
  reserveFullIsl: boolean;
}

export interface OpenVllmEngine {
  readonly engine: VllmEngine;
  /** Rank r's manager at index r. */
  readonly kvs: readonly VllmKvCacheManager[];
  /** The id checksum over every rank (several ranks), else undefined: rank 0's pool's own. */
  readonly idChecksum: (() => number) | undefined;
  /** Gives every rank's pool back. */
  dispose(): void;
}

/** The ranks' KV-cache managers of `p` (the caller disposes them); `shared` is their common checksum when there are several. */
export function openVllmCaches(p: VllmEngineSpec, shared: { h: number }): VllmKvCacheManager[] {
  const kvs: VllmKvCacheManager[] = [];
  try {
    for (let k = 0; k < p.dpSize; k++) {
      kvs.push(new VllmKvCacheManager({ numBlocks: p.numBlocks, blockSize: p.blockSize, seed: p.seed, dpRank: k, ...(p.dpSize > 1 && { sharedChecksum: shared }) }));
    }
  } catch (e) {
    for (const kv of kvs) kv.dispose();
    throw e;
  }
  return kvs;
}

/** The engine `p` describes; every field is checked (naming `spec.<field>`) before a pool is made. */
export function openVllmEngine(p: VllmEngineSpec): OpenVllmEngine {
  checkObject('spec', p);
  checkInt('spec.numBlocks', p.numBlocks, 2);
  checkInt('spec.blockSize', p.blockSize, 1);
  checkInt('spec.seed', p.seed, 0, Number.MAX_SAFE_INTEGER);
  checkInt('spec.dpSize', p.dpSize, 1, 4096);
  checkVllmSchedulerConfig('spec', p);
  const shared = { h: 0 };
  const kvs = openVllmCaches(p, shared);
  const engine = new VllmEngine(kvs, { maxNumSeqs: p.maxNumSeqs, maxNumBatchedTokens: p.maxNumBatchedTokens, longPrefillTokenThreshold: p.longPrefillTokenThreshold, reserveFullIsl: p.reserveFullIsl });
  return {
    engine,
    kvs,
    idChecksum: p.dpSize > 1 ? () => shared.h : undefined,
    dispose: () => {
      for (const kv of kvs) kv.dispose();
    },
  };
}
