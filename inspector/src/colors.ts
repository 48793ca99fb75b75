// One colour per BlockState code (index = code), as CSS and as RGBA pixels.

export const STATE_COLORS = ['#dde1e6', '#3b7ddd', '#8e44ad', '#f0a830', '#1f2328'] as const;

/** Little-endian 0xAABBGGRR words for ImageData. */
export const STATE_PIXELS = Uint32Array.from(STATE_COLORS, (c) => {
  const v = parseInt(c.slice(1), 16);
  return (0xff << 24) | ((v & 0xff) << 16) | (v & 0xff00) | ((v >> 16) & 0xff);
});
