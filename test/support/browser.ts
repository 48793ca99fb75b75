// Headless Debian Chromium for the browser tests, driven by playwright-core.
// Never a browser download: the system's /usr/bin/chromium (apt-get install
// chromium) or $KVPOOL_CHROMIUM. Missing, the browser tests skip with a
// message; under KVPOOL_REQUIRE_EXTERNALS=1 (CI) they fail instead.

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { external } from './externals.js';

export const CHROMIUM_PATH = process.env['KVPOOL_CHROMIUM'] ?? '/usr/bin/chromium';

export const haveChromium = external(
  'Chromium',
  existsSync(CHROMIUM_PATH),
  `${CHROMIUM_PATH} not found (Debian: apt-get install -y chromium; or set KVPOOL_CHROMIUM)`,
);

/** The flags every browser test launches Chromium with (no network chatter, no GPU). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Removes a Chromium profile folder. Chromium's helper processes (crashpad)
 * can still write to it for a moment after the browser exits, so a folder
 * that will not empty is left in the temp directory with a warning: cleanup
 * is not what the tests check.
 */
export function removeProfile(profile: string): void {
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  } catch (e) {
    console.warn(`could not remove the browser profile ${profile}: ${(e as Error).message}`);
  }
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** A fresh headless Chromium with its own throw-away profile (--user-data-dir). */
export async function launchChromium(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'kvpool-chromium-'));
  // launchPersistentContext is how Playwright takes a --user-data-dir.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1400, height: 1000 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      removeProfile(profile);
    },
  };
}
