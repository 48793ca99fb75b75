// Where a profile named by a string comes from. A bundle's files are read
// from disk only in Node: the Node entry installs a reader of presets and
// folders here (node/profile-files.ts); elsewhere a profile is given parsed
// (parseProfileBundle) and a name is refused, saying so.

import { describe, restated } from '../validate.js';
import type { ProfileBundle } from './profile-bundle.js';

/** Reads a preset (by name) or a bundle folder (by path) into a parsed bundle. */
export type ProfileReader = (nameOrPath: string) => ProfileBundle;

let reader: ProfileReader | undefined;

/** Installs (or, with undefined, removes) the reader of profiles named by a string. */
export function setProfileReader(r: ProfileReader | undefined): void {
  reader = r;
}

/** The bundle a spec's `profile` names or holds. */
export function resolveProfile(where: string, v: unknown): ProfileBundle {
  if (typeof v === 'string') {
    if (v === '') throw new TypeError(`${where} must be a preset name, a bundle folder or a parsed bundle, got ""`);
    if (reader === undefined) throw new TypeError(`${where} ${JSON.stringify(v)}: a profile named by a string is read from files, in Node only; elsewhere pass parseProfileBundle()'s bundle`);
    try {
      return reader(v);
    } catch (e) {
      // The reader names the file and line; the caller's field (a flag, on the command line) goes first.
      if (!(e instanceof Error)) throw e;
      throw restated(e, `${where}: ${e.message}`);
    }
  }
  const b = v as Partial<ProfileBundle> | null;
  if (b === null || typeof b !== 'object' || typeof b.sha256 !== 'string' || typeof b.name !== 'string' || b.tp === null || typeof b.tp !== 'object' || b.model === null || typeof b.model !== 'object' || b.sequence === null || typeof b.sequence !== 'object') {
    throw new TypeError(`${where} must be a preset name, a bundle folder or a bundle from parseProfileBundle(), got ${describe(v)}`);
  }
  return b as ProfileBundle;
}
