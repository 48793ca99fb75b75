// The pool's options, validated as a whole: each rank is built from the
// parsed form (ranks/build-rank.ts). Which options combine, and why the few
// that do not are refused, is the table in docs/combinations.md; an option
// that would do nothing in the configuration given is an error, never
// silently ignored.

import { COMPOSITE_OPTION_KEYS, parseCompositeLayout, type CompositeBlockManagerOptions, type ManagerType } from '../managers/composite-block-manager.js';
import { parseEvictionPolicy, type EvictionPolicy } from '../managers/eviction-policy.js';
import { checkBool, checkInt, checkKeys, checkObject, checkSeed, describe } from '../validate.js';
import type { LinearStateReuse } from '../ranks/linear-state-add-on.js';
import type { RankConfig } from '../ranks/build-rank.js';
import { XTENSOR_POOL_KEYS, parseXTensorPoolOptions, type XTensorPoolOptions } from './xtensor-options.js';

/** The pool options that select and shape composite ranks (see CompositeBlockManagerOptions). */
export type CompositePoolOptions = Partial<Omit<CompositeBlockManagerOptions, 'blockSize' | 'numBlocks' | 'managerTypes'>> & {
  /** Sub-manager types per rank (0 / 'full', 1 / 'sliding-window'); given, every rank is a composite. */
  managerTypes?: readonly ManagerType[];
};

export interface LinearStatePoolOptions {
  /** One linear-state cache per dp rank (default false). */
  enableLinearState?: boolean;
  /** Slots per rank's cache, padding included (default 202, like single ids). */
  linearStateNumSlots?: number;
  /**
   * Which shared KV prefix a checkpoint makes reusable: up to the furthest
   * checkpointed block boundary (every xLLM version; default), or only the
   * leading run of checkpointed boundaries (the rule as the reference's
   * design description states it). See docs/linear-state.md.
   */
  linearStateReuse?: LinearStateReuse;
}

export interface BlockManagerPoolOptions extends CompositePoolOptions, LinearStatePoolOptions, XTensorPoolOptions {
  /** Physical KV blocks per dp rank, padding id 0 included (>= 2). */
  numBlocks: number;
  /** Tokens per block (>= 1). */
  blockSize: number;
  /** Data-parallel ranks, one rank manager each (default 1). */
  dpSize?: number;
  /** Reuse full blocks through the prefix cache (default true; false, and only false, on composite and XTensor ranks). */
  enablePrefixCache?: boolean;
  /**
   * Single ids per rank, padding included (default 202: the reference's
   * max_concurrent_requests of 200, plus 2).
   */
  singleBlockCapacity?: number;
  /** XXH3-128 seed of the block hash chain (default 1024). */
  seed?: number | bigint;
  /**
   * Disaggregated prefill/decode (default false): a transfer thread touches
   * the managers too, so each rank's managers live in shared memory and
   * every pool operation holds their locks.
   */
  enableDisaggPd?: boolean;
  /** A KV-cache store shares the managers (default false): as enableDisaggPd. */
  enableKvcacheStore?: boolean;
  /** With enableDisaggPd or enableKvcacheStore: longest wait for a rank's locks, in ms (default 10000). */
  lockTimeoutMs?: number;
  /**
   * Which cached block each rank evicts first: 'lru' (default, the reference's
   * order), 'lfu', or 'priority' (Sequence.setRetention marks; see setTime).
   */
  evictionPolicy?: EvictionPolicy;
}

const KEYS = [
  'numBlocks', 'blockSize', 'dpSize', 'enablePrefixCache', 'singleBlockCapacity', 'seed', 'enableDisaggPd', 'enableKvcacheStore',
  'lockTimeoutMs', 'evictionPolicy', 'enableLinearState', 'linearStateNumSlots', 'linearStateReuse',
  ...COMPOSITE_OPTION_KEYS, ...XTENSOR_POOL_KEYS,
] as const;

/** The parsed pool options. */
export interface PoolConfig {
  numBlocks: number;
  blockSize: number;
  dpSize: number;
  singleBlockCapacity: number;
  seed: number | bigint;
  rank: RankConfig;
}

/** What a given option needs to have an effect, for the message that refuses it. */
function refuse(option: string, why: string): never {
  throw new RangeError(`options.${option} ${why}`);
}

/**
 * Validates `o` as a whole. `hostNumBlocks` is the host tier's size when the
 * pool has one (HierarchyBlockManagerPool), else null.
 */
export function parsePoolOptions(o: BlockManagerPoolOptions, hostNumBlocks: number | null = null, extraKeys: readonly string[] = []): PoolConfig {
  checkObject('options', o);
  checkKeys('options', o, [...KEYS, ...extraKeys]);
  const numBlocks = checkInt('options.numBlocks', o.numBlocks, 2);
  const blockSize = checkInt('options.blockSize', o.blockSize, 1);
  const dpSize = checkInt('options.dpSize', o.dpSize ?? 1, 1, 4096);
  const singleBlockCapacity = checkInt('options.singleBlockCapacity', o.singleBlockCapacity ?? 202, 2);
  const seed = o.seed ?? 1024;
  const seedHalves = checkSeed('options.seed', seed);

  const composite = o.managerTypes !== undefined;
  const xtensor = parseXTensorPoolOptions(o, numBlocks, blockSize);
  if (composite && xtensor) throw new TypeError('options: managerTypes and enableXtensor choose two different rank kinds; choose one');
  if (!composite) {
    for (const k of COMPOSITE_OPTION_KEYS) if (o[k] !== undefined) refuse(k, 'shapes composite ranks; it does nothing without options.managerTypes');
  }
  const kind = composite ? 'composite' : xtensor ? 'xtensor' : 'plain';
  const prefixDefault = kind === 'plain';
  const prefixCache = checkBool('options.enablePrefixCache', o.enablePrefixCache ?? prefixDefault);
  if (prefixCache && kind !== 'plain') {
    refuse('enablePrefixCache', `cannot be true on ${kind} ranks: ${kind === 'composite' ? 'a composite rank does no prefix caching (as in the reference)' : 'XTensor blocks have no prefix cache'}`);
  }
  let compositeOptions: CompositeBlockManagerOptions | null = null;
  if (composite) {
    compositeOptions = { blockSize, numBlocks, managerTypes: o.managerTypes! };
    for (const k of COMPOSITE_OPTION_KEYS) if (k !== 'managerTypes' && o[k] !== undefined) (compositeOptions as unknown as Record<string, unknown>)[k] = o[k];
    parseCompositeLayout(compositeOptions);
  }

  parseEvictionPolicy('options.evictionPolicy', o.evictionPolicy);
  if (o.evictionPolicy !== undefined && o.evictionPolicy !== 'lru' && !prefixCache) {
    refuse('evictionPolicy', `'${o.evictionPolicy}' orders prefix-cache entries; this pool keeps no prefix cache`);
  }

  const linear = checkBool('options.enableLinearState', o.enableLinearState ?? false);
  if (!linear) {
    for (const k of ['linearStateNumSlots', 'linearStateReuse'] as const) if (o[k] !== undefined) refuse(k, 'does nothing without options.enableLinearState');
  }
  const numSlots = checkInt('options.linearStateNumSlots', o.linearStateNumSlots ?? 202, 2);
  const reuse = o.linearStateReuse ?? 'furthest';
  if (reuse !== 'furthest' && reuse !== 'contiguous') {
    throw new RangeError(`options.linearStateReuse must be 'furthest' or 'contiguous', got ${describe(reuse)}`);
  }

  const concurrent = checkBool('options.enableDisaggPd', o.enableDisaggPd ?? false) || checkBool('options.enableKvcacheStore', o.enableKvcacheStore ?? false);
  if (!concurrent && o.lockTimeoutMs !== undefined) refuse('lockTimeoutMs', 'does nothing without enableDisaggPd or enableKvcacheStore (nothing takes a lock)');
  const lockTimeoutMs = checkInt('options.lockTimeoutMs', o.lockTimeoutMs ?? 10_000, 1);

  if (hostNumBlocks !== null && !prefixCache) {
    throw new TypeError(
      `options: a host tier keeps prefix-cache blocks, and this pool has no prefix cache (${kind === 'plain' ? 'enablePrefixCache is false' : `${kind} ranks keep none`})`,
    );
  }

  return {
    numBlocks,
    blockSize,
    dpSize,
    singleBlockCapacity,
    seed,
    rank: {
      kind,
      numBlocks,
      blockSize,
      seed,
      seedHalves,
      prefixCache,
      evictionPolicy: o.evictionPolicy,
      composite: compositeOptions,
      xtensor,
      linearState: linear ? { numSlots, reuse } : null,
      concurrent: concurrent ? { lockTimeoutMs } : null,
      hostNumBlocks,
    },
  };
}
