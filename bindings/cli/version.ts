// The package's version, for --version and what a command records of itself.

import { readFileSync } from 'node:fs';

/** The package's version (package.json sits two folders up from dist/cli/ and bindings/cli/ alike). */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
