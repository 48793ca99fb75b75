// External references some tests compare against (the Mooncake trace, the
// real xxHash library). A user's clone may lack them: those tests skip with a
// message. CI sets KVPOOL_REQUIRE_EXTERNALS=1, and then a missing one fails.

import { existsSync } from 'node:fs';

export const requireExternals = process.env['KVPOOL_REQUIRE_EXTERNALS'] === '1';

/** Whether an external reference is there; warns (or throws under CI) when it is not. */
export function external(name: string, available: boolean, hint: string): boolean {
  if (available) return true;
  const msg = `[kvpool tests] ${name} not available: ${hint}`;
  if (requireExternals) throw new Error(`${msg} (required: KVPOOL_REQUIRE_EXTERNALS=1)`);
  console.warn(`${msg}; skipping the tests that need it`);
  return false;
}

/** The Mooncake conversation trace: $KVPOOL_TRACE, or ../shared beside the clone. */
export const TRACE_PATH =
  process.env['KVPOOL_TRACE'] ?? new URL('../../../shared/traces/mooncake_conversation.jsonl', import.meta.url).pathname;

export const haveTrace = external('the Mooncake trace', existsSync(TRACE_PATH), `${TRACE_PATH} not found (set KVPOOL_TRACE or put shared/ beside the clone)`);
