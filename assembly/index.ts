// The core's exports: numbers in, numbers out; bulk data through linear memory.
export { alloc, release, heapTop, heapFreeBytes, heapLockStuck, heapState } from "./heap";
export * from "./abi-exports";
export * from "./hash-exports";
export * from "./manager-exports";
export * from "./linear-state-exports";
export * from "./tier-exports";
export * from "./replay-exports";
export * from "./vllm-exports";
export * from "./event-wire";
