// Raw replay-kernel export of the core (see assembly/replay-exports.ts).
export interface ReplayExports {
  /** Writes a request's `len` prompt tokens (hash ids at `ids`, i32 each) to `out` (docs/replay-kernel.md, tokens). */
  replay_prompt_tokens(ids: number, len: number, out: number): void;
  /** Writes `count` consecutive int32 tokens from `first` on to `out`. */
  replay_token_run(out: number, first: number, count: number): void;
}
