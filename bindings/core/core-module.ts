// Turning a WasmSource into a compiled module, and telling the two builds of
// the core apart before an instance is made of the wrong one (each loader
// keeps what it compiled, so a wrong module must be refused before that).

import type { WasmSource } from './core-instance.js';

/** Compiles `source`: a URL or its string is fetched, a Response streamed, bytes compiled, a Module taken as it is. */
export async function compileSource(source: WasmSource, name: string): Promise<WebAssembly.Module> {
  let src: unknown = source;
  if (typeof src === 'string' || src instanceof URL) src = fetch(src);
  if (src instanceof WebAssembly.Module) return src;
  if ((typeof Response !== 'undefined' && src instanceof Response) || typeof (src as PromiseLike<Response>)?.then === 'function') {
    // Streaming compiles while the bytes arrive; a runtime without it gets the whole body.
    if (typeof WebAssembly.compileStreaming === 'function') return WebAssembly.compileStreaming(src as Response | PromiseLike<Response>);
    return WebAssembly.compile(await (await (src as Response | PromiseLike<Response>)).arrayBuffer());
  }
  if (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) return WebAssembly.compile(src as BufferSource);
  // (validate.ts's describe is a layer above the core.)
  const got = typeof src === 'object' && src !== null ? `an object (${(src as object).constructor?.name ?? 'no class'})` : String(src);
  throw new TypeError(`${name} must be a URL, its string, a Response, bytes or a WebAssembly.Module, got ${got}`);
}

/**
 * `module` when it is the kvpool core of the build asked for: the shared
 * build imports its memory and exports the thread calls, the plain one
 * neither. A TypeError naming the other build when it is that one.
 */
export function checkCoreModule(module: WebAssembly.Module, shared: boolean, name: string): WebAssembly.Module {
  const exported = new Set(WebAssembly.Module.exports(module).map((e) => e.name));
  const importsMemory = WebAssembly.Module.imports(module).some((i) => i.module === 'env' && i.name === 'memory' && i.kind === 'memory');
  const core = exported.has('abi_check');
  const isShared = core && importsMemory && exported.has('nextThreadId') && exported.has('threadRelease');
  const isPlain = core && !importsMemory && !exported.has('nextThreadId');
  if (shared ? isShared : isPlain) return module;
  const wanted = shared ? 'the shared-memory core (build/kvpool-shared.wasm)' : 'the kvpool core (build/kvpool.wasm)';
  const found = shared ? (isPlain ? '; it is the plain core (build/kvpool.wasm)' : '') : isShared ? '; it is the shared-memory core (build/kvpool-shared.wasm)' : '';
  throw new TypeError(`kvpool: ${name} is not ${wanted}${found}`);
}
