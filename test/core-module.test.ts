// Loading the core from a source given by hand (the browser path): a source
// that is not the right build is refused by name, and nothing is kept, so a
// later call with the right file loads it.

import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';

const bytes = (f: string) => readFileSync(new URL(`../build/${f}`, import.meta.url));
// The smallest valid module: magic and version, no sections.
const empty = new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);

describe('loadCore(source)', () => {
  it('refuses what is not the plain core, keeps nothing, then loads the right one', async () => {
    vi.resetModules(); // a fresh plain-core module: no core loaded, no loader registered
    const { loadCore, isCoreLoaded } = await import('../bindings/core/plain-core.js');
    await expect(loadCore(42 as never)).rejects.toThrow(
      new TypeError('source must be a URL, its string, a Response, bytes or a WebAssembly.Module, got 42'),
    );
    await expect(loadCore(empty)).rejects.toThrow(new TypeError('kvpool: source is not the kvpool core (build/kvpool.wasm)'));
    await expect(loadCore(bytes('kvpool-shared.wasm'))).rejects.toThrow(
      new TypeError('kvpool: source is not the kvpool core (build/kvpool.wasm); it is the shared-memory core (build/kvpool-shared.wasm)'),
    );
    expect(isCoreLoaded()).toBe(false);
    await loadCore(new WebAssembly.Module(bytes('kvpool.wasm')));
    expect(isCoreLoaded()).toBe(true);
  });
});
