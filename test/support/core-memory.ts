// Taking a core's linear memory to its limit, for the tests of what happens
// when it runs out. Fresh pages are never zeroed by the core, so taking all
// of a fresh process's 4 GiB reserves it without touching it.

import type { CoreInstance } from '../../bindings/core/core-instance.js';

/** Bytes the core's heap holds for its users (the top, less what was given back). */
export function heapInUse(rt: CoreInstance): number {
  return (rt.ex.heapTop() >>> 0) - rt.ex.heapFreeBytes();
}

/**
 * Takes every region the core can still hand out, big ones first, then ever
 * smaller ones down to 16 bytes (filling the holes given-back regions left);
 * returns them, to be given back with `rt.release`.
 */
export function takeAllRegions(rt: CoreInstance): number[] {
  const taken: number[] = [];
  for (const size of [256 << 20, 16 << 20, 1 << 20, 64 << 10, 4 << 10, 256, 16]) {
    for (let p = rt.alloc(size); p !== 0; p = rt.alloc(size)) taken.push(p);
  }
  return taken;
}
