// The replay kernel's prompt tokens (docs/replay-kernel.md, tokens): token p of a request is
// hashIds[p / 512] * 512 + p % 512. The conversation trace has 145 M of them;
// written here four lanes at a time and copied out once, they cost a third
// of the JS loop's time.

/** Writes the `len` prompt tokens of a request whose hash ids are at `ids` to `out`. */
export function replay_prompt_tokens(ids: usize, len: i32, out: usize): void {
  const step = i32x4.splat(4);
  const ramp = i32x4(0, 1, 2, 3);
  let p = 0;
  for (let c = 0; p < len; c++) {
    const base = load<i32>(ids + (<usize>c << 2)) * 512;
    const end = p + 512 < len ? p + 512 : len;
    let v = i32x4.add(i32x4.splat(base), ramp);
    // Whole groups of four, then the tail one by one.
    for (; p + 4 <= end; p += 4) {
      v128.store(out + (<usize>p << 2), v);
      v = i32x4.add(v, step);
    }
    for (let k = base + (p & 511); p < end; p++, k++) store<i32>(out + (<usize>p << 2), k);
  }
}

/** Writes `count` consecutive tokens `first`, `first` + 1, ... to `out` (a request's output tokens, between their wrap-arounds). */
export function replay_token_run(out: usize, first: i32, count: i32): void {
  let v = i32x4.add(i32x4.splat(first), i32x4(0, 1, 2, 3));
  const step = i32x4.splat(4);
  let j = 0;
  for (; j + 4 <= count; j += 4) {
    v128.store(out + (<usize>j << 2), v);
    v = i32x4.add(v, step);
  }
  for (; j < count; j++) store<i32>(out + (<usize>j << 2), first + j);
}
