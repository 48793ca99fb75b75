// The running sequences and their block tables, oldest (next to finish) first.

import type { Session } from './session.js';

const MAX_ROWS = 48;
const MAX_IDS = 40;

const esc = (s: string) => s.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c]!);

export function renderSequences(el: HTMLElement, session: Session): void {
  const seqs = session.stepper.running();
  const reqs = session.stepper.runningRequests();
  const rows: string[] = [];
  for (let i = 0; i < Math.min(seqs.length, MAX_ROWS); i++) {
    const s = seqs[i]!;
    const t = s.blockTable;
    const k = Math.min(t.length, MAX_IDS);
    const hits: number[] = [];
    const rest: number[] = [];
    for (let j = 0; j < k; j++) (j < s.sharedBlocks ? hits : rest).push(t[j]!);
    const ids = (hits.length > 0 ? `<b>${hits.join(' ')}</b> ` : '') + rest.join(' ');
    const more = t.length > MAX_IDS ? ` … +${t.length - MAX_IDS}` : '';
    rows.push(
      `<tr><td>#${reqs[i]}</td><td>${s.dpRank}</td><td>${s.numTokens}</td><td>${s.numBlocks}</td><td>${s.sharedBlocks}</td><td class="table">${ids}${esc(more)}</td></tr>`,
    );
  }
  const extra = seqs.length > MAX_ROWS ? `<p class="muted">… and ${seqs.length - MAX_ROWS} more</p>` : '';
  el.innerHTML =
    `<h2>Running sequences <span class="muted" data-testid="running-count">${seqs.length}</span></h2>` +
    `<table><thead><tr><th>request</th><th>rank</th><th>tokens</th><th>blocks</th><th>shared</th><th>block table (bold: prefix-cache hits)</th></tr></thead>` +
    `<tbody>${rows.join('')}</tbody></table>${extra}`;
}
