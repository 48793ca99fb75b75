// A profile bundle of one's own on a GPU kvpool does not know by name: the
// shipped Llama-3.1-8B bundle (TP 1) with its meta.yaml saying H100, laid
// out as a user's tree (models/ and architectures/ at its root).

import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PROFILES = join(import.meta.dirname, '../../profiles');

/** The tree's root and the bundle folder in it. */
export function unknownGpuBundle(): { root: string; bundle: string } {
  const root = mkdtempSync(join(tmpdir(), 'kvpool-h100-'));
  const bundle = join(root, 'H100/meta-llama/Llama-3.1-8B/bf16');
  const from = join(PROFILES, 'RTXPRO6000/meta-llama/Llama-3.1-8B/bf16');
  cpSync(join(from, 'tp1'), join(bundle, 'tp1'), { recursive: true });
  const meta = readFileSync(join(from, 'meta.yaml'), 'utf8').replace(/^hardware: RTXPRO6000$/m, 'hardware: H100').replace(/^tp_degrees: .*$/m, 'tp_degrees: [1]');
  if (!meta.includes('hardware: H100')) throw new Error('the shipped meta.yaml no longer names its hardware on a line of its own');
  writeFileSync(join(bundle, 'meta.yaml'), meta);
  cpSync(join(PROFILES, 'models'), join(root, 'models'), { recursive: true });
  cpSync(join(PROFILES, 'architectures'), join(root, 'architectures'), { recursive: true });
  return { root, bundle };
}
