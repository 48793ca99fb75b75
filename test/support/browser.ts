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
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
