// Turns the core's negative return codes into the errors users see.

import { ERR_FREE, ERR_NOT_HELD, ERR_OUT_OF_RANGE, ERR_PADDING } from '../core/abi.js';
import type { CoreExports } from '../core/exports.js';

/** Throws for a rejected id list element (`code` < 0); `ex` is the core instance that rejected it. */
export function throwIdError(
  code: number,
  name: string,
  ids: ArrayLike<number>,
  offset: number,
  numBlocks: number,
  ex: CoreExports,
): never {
  const i = ex.mgr_error_index();
  const at = `${name}[${i + offset}]`;
  const id = ids[i + offset];
  switch (code) {
    case ERR_OUT_OF_RANGE:
      throw new RangeError(`${at} = ${id} is out of range: this manager's ids are 1..${numBlocks - 1}`);
    case ERR_PADDING:
      throw new RangeError(`${at} = 0 is the padding block, which is never handed out`);
    case ERR_NOT_HELD:
      throw new RangeError(`${at} = ${id} has no holder left (only the prefix cache holds it)`);
    case ERR_FREE:
      throw new RangeError(`${at} = ${id} has no holder left (it is free)`);
    default:
      throw new Error(`kvpool: unexpected core error ${code}`);
  }
}
