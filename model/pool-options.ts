// Model of the pool's options (bindings/pool/pool-options.ts), validated as
// a whole: the combination table of docs/combinations.md restated. Every
// combination of rank kind, linear state, concurrency, host tier, salt and
// eviction policy is either built or refused here with the same error class
// as the library; an option that would do nothing is refused too.

import type { ModelKind } from './composite-block-manager.js';
import type { ModelEvictionPolicy } from './prefix-cache.js';
import type { ModelRankConfig } from './ranks/build-rank.js';
import type { ModelLinearStateReuse } from './ranks/linear-state-add-on.js';
import { modelInt } from './validate.js';

export interface ModelPoolOptions {
  numBlocks: number;
  blockSize: number;
  dpSize?: number;
  enablePrefixCache?: boolean;
  singleBlockCapacity?: number;
  /** The library's hash seed: the model's keys are its own (chain-key.ts), so it only needs to be valid. */
  seed?: number | bigint;
  /** Concurrency changes no result: the model takes these as the library does and runs without locks. */
  enableDisaggPd?: boolean;
  enableKvcacheStore?: boolean;
  lockTimeoutMs?: number;
  evictionPolicy?: ModelEvictionPolicy;
  enableLinearState?: boolean;
  linearStateNumSlots?: number;
  linearStateReuse?: ModelLinearStateReuse;
  managerTypes?: readonly (ModelKind | 0 | 1)[];
  compressRatios?: readonly number[];
  slidingWindowSize?: number;
  swaBlocksPerSeq?: number;
  maxSeqsPerBatch?: number;
  maxTokensPerBatch?: number;
  subManagerBlocks?: readonly number[];
  enableXtensor?: boolean;
  numLayers?: number;
  slotSize?: number;
  pageSize?: number;
  numPhysicalPages?: number;
}

export interface ModelPoolConfig {
  numBlocks: number;
  blockSize: number;
  dpSize: number;
  singleBlockCapacity: number;
  /** Prefetches from a KV-cache store are allowed (enableKvcacheStore). */
  kvcacheStore: boolean;
  rank: ModelRankConfig;
}

const COMPOSITE_KEYS = ['managerTypes', 'compressRatios', 'slidingWindowSize', 'swaBlocksPerSeq', 'maxSeqsPerBatch', 'maxTokensPerBatch', 'subManagerBlocks'] as const;
const WINDOW_KEYS = ['slidingWindowSize', 'swaBlocksPerSeq', 'maxSeqsPerBatch', 'maxTokensPerBatch'] as const;
const XTENSOR_KEYS = ['numLayers', 'slotSize', 'pageSize', 'numPhysicalPages'] as const;
const KEYS = new Set<string>([
  'numBlocks', 'blockSize', 'dpSize', 'enablePrefixCache', 'singleBlockCapacity', 'seed', 'enableDisaggPd', 'enableKvcacheStore',
  'lockTimeoutMs', 'evictionPolicy', 'enableLinearState', 'linearStateNumSlots', 'linearStateReuse', 'enableXtensor', ...COMPOSITE_KEYS, ...XTENSOR_KEYS,
]);

function bool(name: string, v: unknown, dflt: boolean): boolean {
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') throw new TypeError(`model: ${name} is not a boolean`);
  return v;
}

function ints(name: string, v: unknown, n: number, min: number): number[] {
  if (!Array.isArray(v)) throw new TypeError(`model: ${name} is not an array`);
  if (v.length !== n) throw new RangeError(`model: ${name} has ${v.length} entries for ${n} sub-managers`);
  return v.map((x, i) => modelInt(`${name}[${i}]`, x, min));
}

/** Validates `o` as a whole; `hostNumBlocks` is the host tier's size (a hierarchy pool) or null. */
export function parseModelPoolOptions(o: ModelPoolOptions, hostNumBlocks: number | null = null, extraKeys: readonly string[] = []): ModelPoolConfig {
  if (o === null || typeof o !== 'object') throw new TypeError('model: options is not an object');
  for (const k of Object.keys(o)) if (!KEYS.has(k) && !extraKeys.includes(k)) throw new TypeError(`model: unknown option ${k}`);
  const numBlocks = modelInt('numBlocks', o.numBlocks, 2);
  const blockSize = modelInt('blockSize', o.blockSize, 1);
  const dpSize = modelInt('dpSize', o.dpSize ?? 1, 1, 4096);
  const singleBlockCapacity = modelInt('singleBlockCapacity', o.singleBlockCapacity ?? 202, 2);
  if (o.seed !== undefined && typeof o.seed !== 'number' && typeof o.seed !== 'bigint') throw new TypeError('model: seed is not a number');

  const composite = o.managerTypes !== undefined;
  const xtensor = bool('enableXtensor', o.enableXtensor, false);
  if (!xtensor) for (const k of XTENSOR_KEYS) if (o[k] !== undefined) throw new RangeError(`model: ${k} does nothing without enableXtensor`);
  if (composite && xtensor) throw new TypeError('model: managerTypes and enableXtensor are two rank kinds');
  if (!composite) for (const k of COMPOSITE_KEYS) if (o[k] !== undefined) throw new RangeError(`model: ${k} does nothing without managerTypes`);
  const kind = composite ? 'composite' : xtensor ? 'xtensor' : 'plain';
  const prefixCache = bool('enablePrefixCache', o.enablePrefixCache, kind === 'plain');
  if (prefixCache && kind !== 'plain') throw new RangeError(`model: ${kind} ranks keep no prefix cache`);

  let compositeOptions: ModelRankConfig['composite'] = null;
  if (composite) {
    if (!Array.isArray(o.managerTypes)) throw new TypeError('model: managerTypes is not an array');
    if (o.managerTypes.length === 0) throw new RangeError('model: managerTypes is empty');
    const kinds = o.managerTypes.map((t, i): ModelKind => {
      if (t === 0 || t === 'full') return 'full';
      if (t === 1 || t === 'sliding-window') return 'sliding-window';
      throw new RangeError(`model: managerTypes[${i}] is not a sub-manager type`);
    });
    const ratios = o.compressRatios === undefined ? kinds.map(() => 1) : ints('compressRatios', o.compressRatios, kinds.length, 0);
    ratios.forEach((r, i) => {
      if (kinds[i] === 'full' && r < 1) throw new RangeError(`model: compressRatios[${i}] = 0 for a full sub-manager`);
    });
    const hasWindow = kinds.includes('sliding-window');
    if (!hasWindow) for (const k of WINDOW_KEYS) if (o[k] !== undefined) throw new RangeError(`model: ${k} does nothing without a window`);
    if (hasWindow && o.slidingWindowSize === undefined) throw new TypeError('model: slidingWindowSize is required with a window');
    const window = o.slidingWindowSize === undefined ? 0 : modelInt('slidingWindowSize', o.slidingWindowSize, 1);
    const subManagerBlocks = o.subManagerBlocks === undefined ? undefined : ints('subManagerBlocks', o.subManagerBlocks, kinds.length, 2);
    kinds.forEach((k, i) => {
      if (k === 'full' && subManagerBlocks === undefined && Math.floor(numBlocks / ratios[i]!) < 1) throw new RangeError(`model: sub-manager ${i} gets no block`);
    });
    compositeOptions = {
      blockSize, numBlocks, kinds, ratios, window,
      ...(o.swaBlocksPerSeq !== undefined && { swaBlocksPerSeq: modelInt('swaBlocksPerSeq', o.swaBlocksPerSeq, 1) }),
      ...(o.maxSeqsPerBatch !== undefined && { maxSeqsPerBatch: modelInt('maxSeqsPerBatch', o.maxSeqsPerBatch) }),
      ...(o.maxTokensPerBatch !== undefined && { maxTokensPerBatch: modelInt('maxTokensPerBatch', o.maxTokensPerBatch) }),
      ...(subManagerBlocks !== undefined && { subManagerBlocks }),
    };
  }

  let xtensorOptions: ModelRankConfig['xtensor'] = null;
  if (xtensor) {
    const numLayers = modelInt('numLayers', o.numLayers, 1);
    const slotSize = modelInt('slotSize', o.slotSize, 1);
    if ((blockSize * slotSize) % 2 !== 0) throw new RangeError('model: blockSize * slotSize is odd');
    const blockBytes = (blockSize * slotSize) / 2;
    const pageSize = modelInt('pageSize', o.pageSize ?? 2 * 1024 * 1024, 1, Number.MAX_SAFE_INTEGER);
    if (blockBytes > pageSize) throw new RangeError('model: a block is larger than a page');
    xtensorOptions = { numBlocks, pageSize, blockBytes, numLayers, ...(o.numPhysicalPages !== undefined && { numPhysicalPages: modelInt('numPhysicalPages', o.numPhysicalPages, 2 * numLayers, Number.MAX_SAFE_INTEGER) }) };
  }

  const policy = o.evictionPolicy;
  if (policy !== undefined && policy !== 'lru' && policy !== 'lfu' && policy !== 'priority') throw new RangeError('model: unknown eviction policy');
  if (policy !== undefined && policy !== 'lru' && !prefixCache) throw new RangeError(`model: '${policy}' orders prefix-cache entries; there are none`);

  const linear = bool('enableLinearState', o.enableLinearState, false);
  if (!linear) for (const k of ['linearStateNumSlots', 'linearStateReuse'] as const) if (o[k] !== undefined) throw new RangeError(`model: ${k} does nothing without enableLinearState`);
  const numSlots = modelInt('linearStateNumSlots', o.linearStateNumSlots ?? 202, 2);
  const reuse = o.linearStateReuse ?? 'furthest';
  if (reuse !== 'furthest' && reuse !== 'contiguous') throw new RangeError('model: unknown linearStateReuse');

  const concurrent = bool('enableDisaggPd', o.enableDisaggPd, false) || bool('enableKvcacheStore', o.enableKvcacheStore, false);
  if (!concurrent && o.lockTimeoutMs !== undefined) throw new RangeError('model: lockTimeoutMs does nothing without concurrency');
  modelInt('lockTimeoutMs', o.lockTimeoutMs ?? 10_000, 1);

  if (hostNumBlocks !== null && !prefixCache) throw new TypeError(`model: a host tier keeps prefix-cache blocks; ${kind} ranks here keep none`);

  return {
    numBlocks,
    blockSize,
    dpSize,
    singleBlockCapacity,
    kvcacheStore: o.enableKvcacheStore === true,
    rank: {
      kind,
      numBlocks,
      blockSize,
      prefixCache,
      evictionPolicy: policy ?? 'lru',
      composite: compositeOptions,
      xtensor: xtensorOptions,
      linearState: linear ? { numSlots, reuse } : null,
      hostNumBlocks,
    },
  };
}
