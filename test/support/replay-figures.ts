// The part of a replay result that implementations must agree on: the
// kernel's figures without timings (and without the configuration echo,
// per-rank counters and warnings that `replay()` adds around them).

import type { ReplayResult } from '../../bindings/replay/kernel.js';

const KEYS = [
  'requests', 'rejected', 'truncated', 'promptBlocks', 'matchedBlocks', 'hitRate', 'evictedBlocks', 'allocatedBlocks', 'idChecksum',
  'freeBlocksAtEnd', 'cachedBlocksAtEnd', 'linearState', 'subManagers', 'hostTier',
] as const;

export function figures(r: Omit<ReplayResult, 'linearState'> & { linearState?: unknown }): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of KEYS) if ((r as Record<string, unknown>)[k] !== undefined) out[k] = (r as Record<string, unknown>)[k];
  return out;
}
