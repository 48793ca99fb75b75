// A content hash for timing models' names (docs/timing.md, names): a saved
// result says which table or profile made it, so two runs with different
// data never share a name. SHA-256 of named texts, each framed by its name
// and length so that no two different sets of texts can run together.

import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';

/** SHA-256 (hex) of [name, text] pairs, in the order given. */
export function contentHash(parts: ReadonlyArray<readonly [string, string]>): string {
  const h = sha256.create();
  for (const [name, text] of parts) {
    const body = utf8ToBytes(text);
    h.update(utf8ToBytes(`${name}\n${body.length}\n`));
    h.update(body);
  }
  return bytesToHex(h.digest());
}

/** The first 12 hex digits: what a model's name shows. */
export function shortHash(hex: string): string {
  return hex.slice(0, 12);
}
