// The pool inspector page: replays a workload through a BlockManagerPool and
// draws the pool live. Steps run in the animation-frame callback and the page
// renders at most once per frame, only when something changed.

import { BLOCK_STATE_NAMES, BlockState, loadCore, parseTrace, type TraceRequest } from '../../bindings/index.js';
import { STATE_COLORS } from './colors.js';
import { BlockGrid } from './grid.js';
import { Plot } from './plots.js';
import { renderSequences } from './sequences.js';
import { DEFAULT_OPTIONS, Session, checkSessionOptions, type SessionOptions } from './session.js';

/** Requests replayed per animation frame at each speed setting. */
const SPEEDS = [1 / 16, 1 / 4, 1, 4, 16, 64, 256, 1024];
/** Time per frame the replay may take, so drawing keeps up. */
const STEP_BUDGET_MS = 12;
const GRID_WIDTH = 720;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const playBtn = $<HTMLButtonElement>('play');
const stepBtn = $<HTMLButtonElement>('step');
const speedInput = $<HTMLInputElement>('speed');
const form = $<HTMLFormElement>('options');
const errorEl = $('error');
const statusEl = $('status');
const ranksEl = $('ranks');
const tooltip = $('tooltip');
const perfEl = $('perf');

let session: Session | null = null;
let grids: BlockGrid[] = [];
let legends: HTMLElement[][] = [];
let figures: HTMLElement[] = [];
let customTrace: { requests: TraceRequest[]; name: string } | null = null;
let playing = false;
let acc = 0;
let dirty = true;
let hover: { rank: number; id: number; x: number; y: number } | null = null;
/** Smoothed milliseconds per frame spent replaying and drawing (shown in the status line). */
const cost = { step: 0, draw: 0 };
const smooth = (old: number, v: number) => old * 0.9 + v * 0.1;

const percent = (v: number) => `${(v * 100).toFixed(1)}%`;
const plots = [
  new Plot(
    'blocks',
    [
      { series: 'free', label: 'free', color: '#6e7781' },
      { series: 'used', label: 'used', color: STATE_COLORS[BlockState.Held] },
      { series: 'cached', label: 'cached (evictable)', color: STATE_COLORS[BlockState.Cached] },
    ],
    () => (session ? (session.options.numBlocks - 1) * session.options.dpSize : 1),
    (v) => Math.round(v).toLocaleString('en-US'),
  ),
  new Plot(
    'prefix-cache hit rate',
    [
      { series: 'hitRate', label: 'overall', color: '#1a7f37' },
      { series: 'recentHitRate', label: 'last 50', color: '#8e44ad' },
    ],
    () => 1,
    percent,
  ),
  new Plot('evictions', [{ series: 'evicted', label: 'blocks evicted', color: '#cf222e' }], () => null, (v) => Math.round(v).toLocaleString('en-US')),
];
$('plots').append(...plots.map((p) => p.canvas));

function readOptions(): SessionOptions {
  const f = new FormData(form);
  const num = (k: string) => Number(f.get(k));
  return {
    numBlocks: num('numBlocks'),
    blockSize: num('blockSize'),
    dpSize: num('dpSize'),
    maxRunning: num('maxRunning'),
    requests: num('requests'),
    seed: num('seed'),
    publishAfterPrefill: f.get('publishAfterPrefill') === 'on',
    eviction: String(f.get('eviction')) as SessionOptions['eviction'],
    hostBlocks: num('hostBlocks'),
    slidingWindow: num('slidingWindow'),
  };
}

function writeOptions(o: SessionOptions): void {
  for (const [k, v] of Object.entries(o)) {
    const input = form.elements.namedItem(k) as HTMLInputElement | HTMLSelectElement | null;
    if (!input) continue;
    if (input instanceof HTMLInputElement && input.type === 'checkbox') input.checked = v as boolean;
    else input.value = String(v);
  }
}

/**
 * Options from the page's query string (?numBlocks=65536&dpSize=4&eviction=lfu…)
 * over the defaults, checked before they reach the form (which would turn a
 * value it cannot show into an empty one); the defaults and why, when not.
 */
function optionsFromUrl(): { options: SessionOptions; error: string | null } {
  const q = new URLSearchParams(location.search);
  const o: Record<string, unknown> = { ...DEFAULT_OPTIONS };
  const speed = q.get('speed');
  if (speed !== null) speedInput.value = speed;
  for (const k of Object.keys(o)) {
    const v = q.get(k);
    if (v === null) continue;
    if (k === 'publishAfterPrefill') o[k] = v === '1' || v === 'true';
    else if (k === 'eviction') o[k] = v;
    else if (v.trim() === '' || !Number.isFinite(Number(v))) return { options: DEFAULT_OPTIONS, error: `the URL's ${k}=${v} is not a number` };
    else o[k] = Number(v);
  }
  try {
    checkSessionOptions(o as unknown as SessionOptions);
  } catch (e) {
    return { options: DEFAULT_OPTIONS, error: `the URL's options: ${(e as Error).message}` };
  }
  return { options: o as unknown as SessionOptions, error: null };
}

function buildRanks(s: Session): void {
  ranksEl.replaceChildren();
  grids = [];
  legends = [];
  figures = [];
  for (let r = 0; r < s.panels.length; r++) {
    const panel = s.panels[r]!;
    const box = document.createElement('div');
    box.className = 'rank';
    const h = document.createElement('h2');
    h.textContent = panel.title;
    h.append(Object.assign(document.createElement('span'), { className: 'muted', textContent: ` · ${panel.manager.numBlocks} blocks of ${panel.manager.blockSize} tokens` }));
    const legend = document.createElement('ul');
    legend.className = 'legend';
    const counts: HTMLElement[] = [];
    BLOCK_STATE_NAMES.forEach((name, code) => {
      const li = document.createElement('li');
      const sw = Object.assign(document.createElement('span'), { className: 'swatch' });
      sw.style.background = STATE_COLORS[code]!;
      const count = document.createElement('span');
      count.dataset['testid'] = `count-r${r}-${name}`;
      li.append(sw, `${name} `, count);
      legend.append(li);
      counts.push(count);
    });
    const fig = Object.assign(document.createElement('p'), { className: 'figures' });
    fig.dataset['testid'] = `figures-r${r}`;
    const rank = r;
    const grid = new BlockGrid(panel.manager.numBlocks, GRID_WIDTH, (id, ev) => {
      hover = id === null ? null : { rank, id, x: ev.clientX, y: ev.clientY };
      updateTooltip();
    });
    grid.canvas.dataset['testid'] = `grid-r${r}`;
    box.append(h, legend, fig, grid.canvas);
    ranksEl.append(box);
    grids.push(grid);
    legends.push(counts);
    figures.push(fig);
  }
}

function reset(): void {
  setPlaying(false);
  errorEl.textContent = '';
  let next: Session;
  try {
    const o = readOptions();
    next = customTrace ? new Session(o, customTrace.requests, customTrace.name) : new Session(o);
  } catch (e) {
    errorEl.textContent = (e as Error).message;
    return;
  }
  session?.dispose();
  session = next;
  $('trace-name').textContent = session.traceName;
  hover = null;
  updateTooltip();
  buildRanks(session);
  dirty = true;
}

function updateTooltip(): void {
  if (!hover || !session) {
    tooltip.hidden = true;
    return;
  }
  const { rank, id } = hover;
  const state = BLOCK_STATE_NAMES[session.states[rank]![id]!]!;
  const lines = [`${session.panels[rank]!.title} · block ${id} · ${state}`];
  if (state !== 'free' && state !== 'padding') {
    const h = session.holders(rank, id);
    const who = h.requests.map((q) => `request #${q}`);
    if (h.prefixCache) who.push('prefix cache');
    lines.push(`holders: ${who.join(', ')}`);
  }
  tooltip.textContent = lines.join('\n');
  tooltip.hidden = false;
  tooltip.style.left = `${hover.x + 14}px`;
  tooltip.style.top = `${hover.y + 14}px`;
}

function render(): void {
  const s = session;
  if (!s) return;
  s.refresh();
  const free = s.pool.numFreeBlocks();
  const used = s.pool.numUsedBlocks();
  const cached = s.pool.numBlocksInPrefixCache();
  const stats = s.pool.stats();
  for (let k = 0; k < grids.length; k++) {
    grids[k]!.draw(s.states[k]!);
    const c = s.counts[k]!;
    legends[k]!.forEach((el, code) => (el.textContent = String(c[code])));
    const panel = s.panels[k]!;
    const r = panel.rank;
    const m = panel.manager;
    figures[k]!.textContent =
      k < s.pool.dpSize
        ? `pool figures: free ${free[r]} · used ${used[r]} · in prefix cache ${cached[r]} (evictable ${stats[r]!.numEvictableBlocks})` +
          ` · evicted so far ${stats[r]!.blocksEvicted}`
        : `host figures: free ${m.numFreeBlocks()} · cached ${m.numBlocksInPrefixCache()} · evicted so far ${m.stats().blocksEvicted}`;
  }
  for (const p of plots) p.draw(s.samples);
  // The table and the status line come from the same moment: the table
  // updates only the rows that changed, so it can follow every frame.
  renderSequences($('sequences'), s);
  const res = s.stepper.result();
  statusEl.textContent =
    `request ${s.done} / ${s.stepper.total}${s.finished ? ' · finished' : ''} · running ${s.stepper.running().length}` +
    ` · hit rate ${percent(res.hitRate)} · evicted ${res.evictedBlocks} · rejected ${res.rejected} · truncated ${res.truncated}` +
    (s.mode === 'plain' ? '' : ` · ${s.mode}`);
  perfEl.textContent = `per frame: replay ${cost.step.toFixed(1)} ms · draw ${cost.draw.toFixed(1)} ms`;
  updateTooltip();
}

function setPlaying(on: boolean): void {
  playing = on && session !== null && !session.finished;
  playBtn.textContent = playing ? 'Pause' : 'Play';
  acc = 0;
}

function frame(): void {
  if (playing && session) {
    acc += SPEEDS[Number(speedInput.value)]!;
    const n = Math.floor(acc);
    acc -= n;
    const t0 = performance.now();
    if (n > 0 && session.step(n, STEP_BUDGET_MS) > 0) dirty = true;
    if (n > 0) cost.step = smooth(cost.step, performance.now() - t0);
    if (session.finished) setPlaying(false);
  }
  if (dirty) {
    dirty = false;
    const t0 = performance.now();
    render();
    cost.draw = smooth(cost.draw, performance.now() - t0);
  }
  requestAnimationFrame(frame);
}

async function loadTraceFile(file: File): Promise<void> {
  try {
    const requests = parseTrace(await file.text());
    if (requests.length === 0) throw new Error(`${file.name} holds no requests`);
    customTrace = { requests, name: `${file.name} (${requests.length} requests)` };
    reset();
  } catch (e) {
    errorEl.textContent = `${file.name}: ${(e as Error).message}`;
  }
}

function showSpeed(): void {
  const v = SPEEDS[Number(speedInput.value)]!;
  $('speed-label').textContent = v >= 1 ? `${v} req/frame` : `1 req / ${1 / v} frames`;
}

playBtn.addEventListener('click', () => setPlaying(!playing));
stepBtn.addEventListener('click', () => {
  setPlaying(false);
  if (session && session.step(1) > 0) dirty = true;
});
speedInput.addEventListener('input', showSpeed);
form.addEventListener('submit', (e) => {
  e.preventDefault();
  reset();
});
$('builtin').addEventListener('click', () => {
  customTrace = null;
  reset();
});
const fileInput = $<HTMLInputElement>('trace-file');
fileInput.addEventListener('change', () => {
  const f = fileInput.files?.[0];
  if (f) void loadTraceFile(f);
  fileInput.value = '';
});
const dropHint = $('drop-hint');
document.addEventListener('dragover', (e) => {
  e.preventDefault();
  dropHint.hidden = false;
});
document.addEventListener('dragleave', (e) => {
  if (e.relatedTarget === null) dropHint.hidden = true;
});
document.addEventListener('drop', (e) => {
  e.preventDefault();
  dropHint.hidden = true;
  const f = e.dataTransfer?.files[0];
  if (f) void loadTraceFile(f);
});
document.addEventListener('keydown', (e) => {
  if (e.target instanceof HTMLInputElement) return;
  if (e.key === ' ') {
    e.preventDefault();
    setPlaying(!playing);
  } else if (e.key === 'ArrowRight') stepBtn.click();
});

/** For tests and the console: the live session and the page's controls. */
declare global {
  interface Window {
    kvpoolInspector?: { readonly session: Session | null; ready: boolean };
  }
}

async function start(): Promise<void> {
  const url = optionsFromUrl();
  writeOptions(url.options);
  showSpeed();
  try {
    await loadCore();
  } catch (e) {
    errorEl.textContent = `could not load the Wasm core: ${(e as Error).message}`;
    return;
  }
  reset();
  if (url.error) errorEl.textContent = `${url.error}; the defaults are shown instead`;
  window.kvpoolInspector = {
    get session() {
      return session;
    },
    ready: true,
  };
  requestAnimationFrame(frame);
}

void start();
