// The pool options that put a rank's KV blocks on mapped pages
// (XTensorBlockManagerImpl), as the reference's enable_xtensor does.

import { XTensorBlockManagerImpl, type XTensorBlockManagerOptions } from '../managers/xtensor-block-manager-impl.js';
import { checkBool, checkInt } from '../validate.js';

export interface XTensorPoolOptions {
  /** KV blocks on virtual pages mapped on demand (XTensorBlockManagerImpl); no prefix cache. */
  enableXtensor?: boolean;
  /** Model layers (required with enableXtensor). */
  numLayers?: number;
  /** Bytes of one token's KV slot (K and V) in one layer (required with enableXtensor). */
  slotSize?: number;
  /** Bytes of a virtual page (default 2 MiB, the reference's page granularity). */
  pageSize?: number;
  /** Physical pages each rank can map (default: enough to back every block). */
  numPhysicalPages?: number;
}

export const XTENSOR_POOL_KEYS = ['enableXtensor', 'numLayers', 'slotSize', 'pageSize', 'numPhysicalPages'] as const;

/** A rank's XTensor manager options but its dp rank. */
export type XTensorRankOptions = Omit<XTensorBlockManagerOptions, 'dpRank'>;

/**
 * With `enableXtensor`, the validated options of each rank's manager;
 * otherwise null (and then no XTensor option may be given: it would do nothing).
 */
export function parseXTensorPoolOptions(o: XTensorPoolOptions, numBlocks: number, blockSize: number): XTensorRankOptions | null {
  if (!checkBool('options.enableXtensor', o.enableXtensor ?? false)) {
    for (const k of XTENSOR_POOL_KEYS) {
      if (k !== 'enableXtensor' && o[k] !== undefined) throw new RangeError(`options.${k} shapes XTensor pages; it does nothing without options.enableXtensor`);
    }
    return null;
  }
  const numLayers = checkInt('options.numLayers', o.numLayers, 1);
  const slotSize = checkInt('options.slotSize', o.slotSize, 1);
  if ((blockSize * slotSize) % 2 !== 0) {
    throw new RangeError(`options.slotSize = ${slotSize} times options.blockSize = ${blockSize} must be even (a block's K or V half is blockSize * slotSize / 2 bytes)`);
  }
  const opts: XTensorRankOptions = {
    numBlocks,
    blockSize,
    numLayers,
    blockBytes: (blockSize * slotSize) / 2,
    pageSize: o.pageSize ?? 2 * 1024 * 1024,
    ...(o.numPhysicalPages === undefined ? {} : { numPhysicalPages: o.numPhysicalPages }),
  };
  new XTensorBlockManagerImpl(opts).dispose(); // validates every option before the pool builds anything
  return opts;
}
