// Entry of the shared-memory build (build/kvpool-shared.wasm): the same core,
// compiled with threads over an imported shared memory, one instance per
// thread. See heap.ts for what differs.
export * from "./index";
export { nextThreadId } from "./heap";
