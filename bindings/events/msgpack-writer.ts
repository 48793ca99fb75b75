// A growable msgpack writer for the event encoders' hot loops. The general
// msgpack library (@msgpack/msgpack) builds a value tree first; event batches
// are written straight from the core's records instead, millions of blocks
// per replay, so the few msgpack forms they need are written here by hand.
// Lengths not known in advance (a batch's events) take the 32-bit header
// forms and are patched when known; msgpack decoders accept any length form.

const utf8 = new TextEncoder();

export class MsgpackWriter {
  buf: Uint8Array;
  pos = 0;
  private view: DataView;

  constructor(initial = 1 << 16) {
    this.buf = new Uint8Array(initial);
    this.view = new DataView(this.buf.buffer);
  }

  /** Room for `n` more bytes. */
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.pos + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  /** The bytes written since `from` (a copy), and forgets them. */
  take(from = 0): Uint8Array {
    const out = this.buf.slice(from, this.pos);
    this.pos = from;
    return out;
  }

  /** Bytes pre-encoded (a key, a tag): written as they are. */
  raw(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  nil(): void {
    this.ensure(1);
    this.buf[this.pos++] = 0xc0;
  }

  arrayHeader(n: number): void {
    this.ensure(5);
    const b = this.buf;
    if (n < 16) b[this.pos++] = 0x90 | n;
    else if (n < 0x10000) {
      b[this.pos++] = 0xdc;
      b[this.pos++] = n >>> 8;
      b[this.pos++] = n & 0xff;
    } else {
      b[this.pos++] = 0xdd;
      this.view.setUint32(this.pos, n);
      this.pos += 4;
    }
  }

  mapHeader(n: number): void {
    this.ensure(1);
    this.buf[this.pos++] = 0x80 | n; // the encoders' maps have fewer than 16 entries
  }

  /** A 32-bit array header to patch later (`patchArray32`); returns its position. */
  array32(): number {
    this.ensure(5);
    const at = this.pos;
    this.buf[at] = 0xdd;
    this.pos += 5;
    return at;
  }

  patchArray32(at: number, n: number): void {
    this.view.setUint32(at + 1, n);
  }

  /** An integer (a safe integer). */
  int(v: number): void {
    this.ensure(9);
    const b = this.buf;
    if (v >= 0) {
      if (v < 128) b[this.pos++] = v;
      else if (v < 0x100) {
        b[this.pos++] = 0xcc;
        b[this.pos++] = v;
      } else if (v < 0x10000) {
        b[this.pos++] = 0xcd;
        b[this.pos++] = v >>> 8;
        b[this.pos++] = v & 0xff;
      } else if (v < 0x1_0000_0000) {
        b[this.pos++] = 0xce;
        this.view.setUint32(this.pos, v);
        this.pos += 4;
      } else {
        b[this.pos++] = 0xcf;
        this.view.setBigUint64(this.pos, BigInt(v));
        this.pos += 8;
      }
    } else if (v >= -32) b[this.pos++] = v & 0xff;
    else if (v >= -0x8000_0000) {
      b[this.pos++] = 0xd2;
      this.view.setInt32(this.pos, v);
      this.pos += 4;
    } else {
      b[this.pos++] = 0xd3;
      this.view.setBigInt64(this.pos, BigInt(v));
      this.pos += 8;
    }
  }

  /** `n` int32 tokens of `src` from index `at`. */
  int32s(src: Int32Array, at: number, n: number): void {
    this.ensure(n * 5);
    const b = this.buf;
    let q = this.pos;
    for (let i = at, end = at + n; i < end; i++) {
      const t = src[i]!;
      if (t >= 0 && t < 128) b[q++] = t;
      else if (t >= 0 && t < 0x10000) {
        if (t < 0x100) {
          b[q++] = 0xcc;
          b[q++] = t;
        } else {
          b[q++] = 0xcd;
          b[q++] = t >>> 8;
          b[q++] = t & 0xff;
        }
      } else {
        b[q++] = t >= 0 ? 0xce : 0xd2;
        b[q++] = t >>> 24;
        b[q++] = (t >>> 16) & 0xff;
        b[q++] = (t >>> 8) & 0xff;
        b[q++] = t & 0xff;
      }
    }
    this.pos = q;
  }

  /** A float 64 (msgspec's `float`, even for an integral value). */
  f64(v: number): void {
    this.ensure(9);
    this.buf[this.pos++] = 0xcb;
    this.view.setFloat64(this.pos, v);
    this.pos += 8;
  }

  str(s: string): void {
    this.raw(encodeStr(s));
  }
}

/** `s` as a msgpack string, ready for `raw`. */
export function encodeStr(s: string): Uint8Array {
  const bytes = utf8.encode(s);
  const n = bytes.length;
  const head = n < 32 ? [0xa0 | n] : n < 0x100 ? [0xd9, n] : n < 0x10000 ? [0xda, n >>> 8, n & 0xff] : [0xdb, n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
  const out = new Uint8Array(head.length + n);
  out.set(head);
  out.set(bytes, head.length);
  return out;
}
