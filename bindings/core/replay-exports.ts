// Raw replay-kernel export of the core (see assembly/replay-exports.ts).
export interface ReplayExports {
  /** Writes a request's `len` prompt tokens (hash ids at `ids`, i32 each) to `out` (docs/replay-kernel.md, tokens). */
  replay_prompt_tokens(ids: number, len: number, out: number): void;
}
