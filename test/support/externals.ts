// External references some tests compare against (the real xxHash library,
// Chromium). A user's clone may lack them: those tests skip with a message.
// CI sets KVPOOL_REQUIRE_EXTERNALS=1, and then a missing one fails. The
// Mooncake trace is not one of them: it ships in traces/.

import { existsSync } from 'node:fs';
import { BUILTIN_TRACES } from '../../bindings/node/trace-file.js';

export const requireExternals = process.env['KVPOOL_REQUIRE_EXTERNALS'] === '1';

/** Whether an external reference is there; warns (or throws under CI) when it is not. */
export function external(name: string, available: boolean, hint: string): boolean {
  if (available) return true;
  const msg = `[kvpool tests] ${name} not available: ${hint}`;
  if (requireExternals) throw new Error(`${msg} (required: KVPOOL_REQUIRE_EXTERNALS=1)`);
  console.warn(`${msg}; skipping the tests that need it`);
  return false;
}

/** The Mooncake conversation trace: the copy in traces/ (gzipped), or $KVPOOL_TRACE. */
export const TRACE_PATH = process.env['KVPOOL_TRACE'] ?? BUILTIN_TRACES['mooncake-conversation']!.file;

export const haveTrace = external('the Mooncake trace', existsSync(TRACE_PATH), `${TRACE_PATH} not found (the repository ships traces/mooncake-conversation.jsonl.gz)`);
