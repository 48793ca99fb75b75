// The running sequences and their block tables, oldest (next to finish) first.
// Redrawn every frame with the status line: the rows are kept and only the
// cells whose text changed are written, so the DOM work stays small.

import type { Session } from './session.js';

const MAX_ROWS = 48;
const MAX_IDS = 40;
const COLUMNS = ['request', 'rank', 'tokens', 'blocks', 'shared', 'block table (bold: prefix-cache hits)'];

interface Table {
  count: HTMLElement;
  body: HTMLTableSectionElement;
  rows: HTMLTableRowElement[];
  more: HTMLElement;
  /** Last text written per row and cell (the block-table cell as HTML). */
  last: string[][];
}

const tables = new WeakMap<HTMLElement, Table>();
const esc = (s: string) => s.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c]!);

function build(el: HTMLElement): Table {
  el.innerHTML =
    `<h2>Running sequences <span class="muted" data-testid="running-count"></span></h2>` +
    `<table><thead><tr>${COLUMNS.map((c) => `<th>${esc(c)}</th>`).join('')}</tr></thead><tbody></tbody></table><p class="muted"></p>`;
  const t: Table = {
    count: el.querySelector('[data-testid="running-count"]')!,
    body: el.querySelector('tbody')!,
    rows: [],
    more: el.querySelector('p')!,
    last: [],
  };
  tables.set(el, t);
  return t;
}

export function renderSequences(el: HTMLElement, session: Session): void {
  const t = tables.get(el) ?? build(el);
  const seqs = session.running();
  const reqs = session.stepper.runningRequests();
  const n = Math.min(seqs.length, MAX_ROWS);
  t.count.textContent = String(seqs.length);
  while (t.rows.length < n) {
    const tr = t.body.insertRow();
    for (let c = 0; c < COLUMNS.length; c++) tr.insertCell().className = c === COLUMNS.length - 1 ? 'table' : '';
    t.rows.push(tr);
    t.last.push(COLUMNS.map(() => ''));
  }
  for (let i = 0; i < t.rows.length; i++) t.rows[i]!.hidden = i >= n;
  for (let i = 0; i < n; i++) {
    const s = seqs[i]!;
    const table = session.panels[s.dpRank]!.table(s); // a composite rank: its capacity sub-manager's table
    const k = Math.min(table.length, MAX_IDS);
    const hits: number[] = [];
    const rest: number[] = [];
    for (let j = 0; j < k; j++) (j < s.sharedBlocks ? hits : rest).push(table[j]!);
    const more = table.length > MAX_IDS ? ` … +${table.length - MAX_IDS}` : '';
    const cells = [`#${reqs[i]}`, String(s.dpRank), String(s.numTokens), String(table.length), String(s.sharedBlocks)];
    const ids = (hits.length > 0 ? `<b>${hits.join(' ')}</b> ` : '') + rest.join(' ') + esc(more);
    const last = t.last[i]!;
    const tds = t.rows[i]!.cells;
    for (let c = 0; c < cells.length; c++) {
      if (last[c] !== cells[c]) tds[c]!.textContent = last[c] = cells[c]!;
    }
    if (last[5] !== ids) tds[5]!.innerHTML = last[5] = ids;
  }
  t.more.textContent = seqs.length > MAX_ROWS ? `… and ${seqs.length - MAX_ROWS} more` : '';
}
