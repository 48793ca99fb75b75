// Views of a core's linear memory, rebuilt in place after it grows so that
// everything holding the object sees the new buffer.

/** The memory views a staging set copies through (refreshed in place by its owner). */
export interface MemViews {
  u8: Uint8Array;
  i32: Int32Array;
  u32: Uint32Array;
  f64: Float64Array;
  buffer: ArrayBufferLike;
}

/**
 * A copy of src[start, start + n). Small copies are made and filled rather
 * than sliced: V8 keeps small typed arrays on its heap, and for one id this
 * took ~48 ns against ~90 for slice() here.
 */
export function copyInt32(src: Int32Array, start: number, n: number): Int32Array {
  if (n > 16) return src.slice(start, start + n);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = src[start + i]!;
  return out;
}

/** Views over no memory yet (a core not instantiated). */
export function emptyViews(): MemViews {
  return { u8: new Uint8Array(0), i32: new Int32Array(0), u32: new Uint32Array(0), f64: new Float64Array(0), buffer: new ArrayBuffer(0) };
}

/** Points every view at `buf` (after memory grew), in place so holders of `mem` see it. */
export function rebuildViews(mem: MemViews, buf: ArrayBufferLike): void {
  mem.buffer = buf;
  mem.u8 = new Uint8Array(buf);
  mem.i32 = new Int32Array(buf);
  mem.u32 = new Uint32Array(buf);
  mem.f64 = new Float64Array(buf);
}
