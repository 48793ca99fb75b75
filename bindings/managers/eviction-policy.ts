// Which cached block goes first when blocks run short. 'lru' is the
// reference's order (and the default); the others order the evictable
// blocks by a per-block key, least recent first among equal keys (see
// assembly/lru.ts and docs/eviction.md).

import { describe } from '../validate.js';

export type EvictionPolicy = 'lru' | 'lfu' | 'priority';

/** Policy names in the order of the core's POLICY_* codes (assembly/layout.ts). */
export const EVICTION_POLICIES: readonly EvictionPolicy[] = ['lru', 'lfu', 'priority'];

/** The priority of unmarked blocks and of blocks whose retention ended (as TensorRT-LLM). */
export const DEFAULT_PRIORITY = 35;

/** The core code of a policy option (undefined: 'lru'); throws naming the option otherwise. */
export function parseEvictionPolicy(name: string, v: unknown): number {
  if (v === undefined) return 0;
  const code = EVICTION_POLICIES.indexOf(v as EvictionPolicy);
  if (code < 0) {
    // A string that names no policy is a bad value (RangeError); anything else, the wrong kind of value.
    const E = typeof v === 'string' ? RangeError : TypeError;
    throw new E(`${name} must be one of ${EVICTION_POLICIES.map((p) => `'${p}'`).join(', ')}, got ${describe(v)}`);
  }
  return code;
}
