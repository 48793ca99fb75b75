// Run-time checks of what bindings/core/abi.ts cannot pin by itself: the
// header fields the bindings read straight from memory must sit at the
// offsets it names, and a header must fit its slot.

import { Manager } from "./layout";
import { VllmPool } from "./vllm-pool";
import { SLOT_SIZE, HDR_MAGIC, HDR_GEN, HDR_LOCK } from "../bindings/core/abi";

/** 0 when the header layout matches the ABI; else the number of the first mismatch. */
export function abi_check(): i32 {
  if (offsetof<Manager>("magic") != <usize>HDR_MAGIC) return 1;
  if (offsetof<Manager>("gen") != <usize>HDR_GEN) return 2;
  if (offsetof<Manager>("lockWord") != <usize>HDR_LOCK) return 3;
  if (offsetof<Manager>("lockDepth") != <usize>HDR_LOCK + 4) return 4;
  if (offsetof<Manager>() > <usize>SLOT_SIZE) return 5;
  if (offsetof<VllmPool>("magic") != <usize>HDR_MAGIC || offsetof<VllmPool>("gen") != <usize>HDR_GEN) return 6;
  if (offsetof<VllmPool>("lockWord") != <usize>HDR_LOCK || offsetof<VllmPool>("lockDepth") != <usize>HDR_LOCK + 4) return 7;
  if (offsetof<VllmPool>() > <usize>SLOT_SIZE) return 8;
  return 0;
}
