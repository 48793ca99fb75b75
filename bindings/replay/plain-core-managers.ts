// Whether a pool's managers stage tokens into the core the replay writes its
// prompts in: a prompt kept in that core only (ReplayTarget.keepsPrompt) is
// invisible to a manager of another core (the thread-safe managers' shared
// core), which would read the sequence's own buffer instead.

import { isCoreLoaded, plainCore } from '../core/plain-core.js';
import { CoreManager } from '../managers/core-manager.js';

/** True when every one of `managers` is a core manager of the plain core. */
export function stageInPlainCore(managers: readonly unknown[]): boolean {
  if (!isCoreLoaded()) return false;
  const rt = plainCore();
  return managers.every((m) => m instanceof CoreManager && m.rt === rt);
}
