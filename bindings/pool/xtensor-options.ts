// The pool options that put a rank's KV blocks on mapped pages
// (XTensorBlockManagerImpl), as the reference's enable_xtensor does.

import { XTensorBlockManagerImpl } from '../managers/xtensor-block-manager-impl.js';
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

/**
 * With `enableXtensor`, a validated factory of each rank's manager (its
 * padding block reserved at once); otherwise null.
 */
export function xtensorManagerFactory(
  o: XTensorPoolOptions,
  numBlocks: number,
  blockSize: number,
): ((dpRank: number) => XTensorBlockManagerImpl) | null {
  if (!checkBool('options.enableXtensor', o.enableXtensor ?? false)) return null;
  const numLayers = checkInt('options.numLayers', o.numLayers, 1);
  const slotSize = checkInt('options.slotSize', o.slotSize, 1);
  if ((blockSize * slotSize) % 2 !== 0) {
    throw new RangeError(`options.slotSize = ${slotSize} times options.blockSize = ${blockSize} must be even (a block's K or V half is blockSize * slotSize / 2 bytes)`);
  }
  const opts = {
    numBlocks,
    blockSize,
    numLayers,
    blockBytes: (blockSize * slotSize) / 2,
    pageSize: o.pageSize ?? 2 * 1024 * 1024,
    ...(o.numPhysicalPages === undefined ? {} : { numPhysicalPages: o.numPhysicalPages }),
  };
  new XTensorBlockManagerImpl(opts); // validates every option before the pool builds anything
  return (dpRank) => {
    const m = new XTensorBlockManagerImpl({ ...opts, dpRank });
    m.reservePaddingBlocks();
    return m;
  };
}
