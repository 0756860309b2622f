import type { VerdictCode } from '../core/verdict.js';
import {
  filterAdminQueue,
  leasesTable,
  postureBanners,
  triggerLines,
  verdictsTable,
  ageTone,
  type AdminQueueView,
  type WaitingEntry,
} from '../views/admin-queue.js';
import { age, countText, durationText, text, type CellTable } from '../views/cells.js';
import { runnerFullness, runnersTable } from '../views/runners.js';
import type { FeedState } from './feed.js';
import { clip, loadBar, pad, seg, sparkline, tableLines, type Line, type Segment } from './lines.js';

export const PANES = ['lanes', 'leases', 'shards', 'waiting', 'runners'] as const;
export type PaneId = (typeof PANES)[number];

/** Everything the operator has chosen: components are pure functions of this and the feed. */
export interface UiState {
  focus: PaneId;
  selected: Record<PaneId, number>;
  filter: string;
  /** The filter being typed after `/`, until Enter or Esc. */
  editingFilter: string | null;
  paused: boolean;
  help: boolean;
  /** The waiting group listed (Enter), or null for the groups. */
  drill: VerdictCode | null;
  /** The step explained (`e`), or null. */
  explain: number | null;
  /** A lever waiting for y/n. */
  confirm: { runnerId: string; runnerName: string; drained: boolean } | null;
  message: { text: string; tone: 'ok' | 'warn' | 'bad' } | null;
}

export const INITIAL_UI: UiState = {
  focus: 'lanes',
  selected: { lanes: 0, leases: 0, shards: 0, waiting: 0, runners: 0 },
  filter: '',
  editingFilter: null,
  paused: false,
  help: false,
  drill: null,
  explain: null,
  confirm: null,
  message: null,
};

export interface ScreenProps {
  feed: FeedState;
  ui: UiState;
  rows: number;
  columns: number;
  /** Local wall clock of this render (ages of the refresh and of the stale mark). */
  now: number;
  sourceName: string;
}

const TITLES: Record<PaneId, string> = { lanes: 'Lanes', leases: 'Leases', shards: 'Shards', waiting: 'Waiting', runners: 'Runners' };

/** The view the panes show: the filter applied. */
export function visibleView(feed: FeedState, ui: UiState): AdminQueueView | null {
  return feed.view ? filterAdminQueue(feed.view, ui.filter) : null;
}

/** The rows of the focused pane that a selection moves over (for the key handler's bounds). */
export function selectableCount(view: AdminQueueView | null, ui: UiState, pane: PaneId): number {
  if (!view) return 0;
  switch (pane) {
    case 'lanes':
      return view.lanes.length;
    case 'leases':
      return view.leases.items.length;
    case 'shards':
      return view.replicas.items.length;
    case 'waiting':
      return ui.drill ? (view.waiting.groups.find((g) => g.code === ui.drill)?.entries.length ?? 0) : view.waiting.groups.length;
    case 'runners':
      return view.runners.length;
  }
}

/** The waiting entry the selection points at: the selected entry of a listed group, else the oldest of the selected group. */
export function selectedEntry(view: AdminQueueView | null, ui: UiState): WaitingEntry | null {
  if (!view) return null;
  if (ui.drill) return view.waiting.groups.find((g) => g.code === ui.drill)?.entries[ui.selected.waiting] ?? null;
  return view.waiting.groups[ui.selected.waiting]?.entries[0] ?? null;
}

export function findEntry(view: AdminQueueView | null, stepId: number | null): WaitingEntry | null {
  if (!view || stepId === null) return null;
  for (const g of view.waiting.groups) for (const e of g.entries) if (e.stepId === stepId) return e;
  return null;
}

// ---- the panes -------------------------------------------------------------------------------

interface PaneContent {
  /** The title, which is also the one-line summary when the pane collapses. */
  title: Line;
  /** Column heads, if any (kept when the rows are cut). */
  head?: Line;
  rows: Line[];
  /** Fixed renderings instead of rows (the shard grid): tallest first, each with its height. */
  fixed?: Line[][];
}

function paneTitle(id: PaneId, focused: boolean, summary: Segment[]): Line {
  return [seg(focused ? '* ' : '  ', focused ? 'accent' : 'muted'), seg(TITLES[id], focused ? 'accent' : undefined, { bold: true, ...(focused ? { inverse: true } : {}) }), seg('  '), ...summary];
}

function marker(ui: UiState, pane: PaneId, row: number): Segment {
  return ui.focus === pane && ui.selected[pane] === row ? seg('> ', 'accent', { bold: true }) : seg('  ');
}

function lanesPane(v: AdminQueueView, feed: FeedState, ui: UiState, width: number): PaneContent {
  const ready = v.lanes.reduce((a, l) => a + l.ready, 0);
  const leased = v.lanes.reduce((a, l) => a + l.leased, 0);
  const oldest = Math.max(-1, ...v.lanes.map((l) => l.oldestAgeMs ?? -1));
  const title = paneTitle('lanes', ui.focus === 'lanes', [
    seg(`ready ${v.waiting.readyEstimated ? '~' : ''}${countText(ready)}`),
    seg(` · leased ${leased}`),
    seg(' · oldest '),
    seg(oldest >= 0 ? durationText(oldest) : '-', ageTone(oldest >= 0 ? oldest : null)),
    seg(` · ${v.deliveries.total} delivered/${durationText(v.deliveries.windowMs)}`, 'muted'),
  ]);
  // The row before the sparkline: marker 2, lane 12, ready 8+7, leased 5+8, oldest 7, gap 2.
  const sparkWidth = Math.max(0, Math.min(40, width - 51));
  const rows: Line[] = v.lanes.map((l, i) => {
    const history = feed.history.map((p) => p.ready[i] ?? 0);
    return [
      marker(ui, 'lanes', i),
      seg(l.lane.padEnd(12), 'accent'),
      seg(`${l.readyEstimated ? '~' : ''}${countText(l.ready, true)}`.padStart(8), l.ready ? undefined : 'muted'),
      seg(' ready '),
      seg(String(l.leased).padStart(5), l.leased ? undefined : 'muted'),
      seg(' leased '),
      seg((l.oldestAgeMs === null ? '-' : durationText(l.oldestAgeMs)).padStart(7), ageTone(l.oldestAgeMs)),
      seg('  '),
      seg(sparkline(history, sparkWidth), 'muted'),
    ];
  });
  for (const l of v.lanes) {
    for (const p of l.projects) {
      rows.push([seg('    '), seg(`${l.lane}/`, 'muted'), seg(p.fairKey, 'accent'), seg(`  weight ${p.weight}  pass ${countText(p.pass, true)}  share `), seg(`${Math.round(p.share * 100)}%`, 'ok'), seg(`  (${p.delivered})`, 'muted')]);
    }
  }
  return { title, rows };
}

function leasesPane(v: AdminQueueView, ui: UiState, width: number): PaneContent {
  const expiring = v.leases.items.filter((l) => l.expiresInMs < l.ttlMs / 3).length;
  const title = paneTitle('leases', ui.focus === 'leases', [
    seg(`${v.leases.total} live`),
    ...(v.leases.shown < v.leases.total ? [seg(` (${v.leases.shown} listed)`, 'muted')] : []),
    ...(expiring ? [seg(` · ${expiring} expiring`, 'warn')] : []),
    seg(' · oldest first', 'muted'),
  ]);
  const t = tableLines(leasesTable(v), width, { caps: [18, 22, 18, 14, 14, 8, 8, 10], prefix: (r) => marker(ui, 'leases', r) });
  return { title, head: t.head, rows: t.rows };
}

/** A letter per owner, so the grid reads without colour too. */
export function ownerLetter(i: number): string {
  return i < 26 ? String.fromCharCode(65 + i) : String(i - 26);
}

function shardsPane(v: AdminQueueView, feed: FeedState, ui: UiState): PaneContent {
  const owners = v.replicas.items.map((r) => r.id);
  for (const o of v.shards) if (o && !owners.includes(o)) owners.push(o);
  const idx = (o: string | null) => (o === null ? -1 : owners.indexOf(o));
  const owned = v.shards.filter((s) => s !== null).length;
  const title = paneTitle('shards', ui.focus === 'shards', [
    seg(`${owned}/${v.shards.length} owned`, owned < v.shards.length ? 'warn' : undefined),
    seg(` · leader ${v.leader?.replicaId ?? 'none'}`, v.leader ? undefined : 'bad'),
    ...(feed.moved.size ? [seg(` · ${feed.moved.size} moved`, 'warn', { bold: true })] : []),
  ]);
  const cell = (n: number, w: number): Segment => {
    const o = idx(v.shards[n] ?? null);
    const t = o < 0 ? '·' : ownerLetter(o);
    return seg(t.padEnd(w), o < 0 ? 'bad' : undefined, { ...(o >= 0 ? { owner: o } : {}), ...(feed.moved.has(n) ? { inverse: true, bold: true } : {}) });
  };
  const legend = owners.map((o, i): Line => {
    const r = v.replicas.items.find((x) => x.id === o);
    const n = v.shards.filter((s) => s === o).length;
    return [
      marker(ui, 'shards', i),
      seg(ownerLetter(i), undefined, { owner: i, bold: true }),
      seg(` ${o}`),
      seg(` ${n}`, n ? undefined : 'muted'),
      seg(` ${r?.state ?? '?'}`, r?.state === 'live' ? 'ok' : r?.state === 'quiesced' ? 'warn' : 'bad'),
      ...(v.leader?.replicaId === o ? [seg(' leader', 'accent')] : []),
    ];
  });
  const grid: Line[] = [];
  for (let row = 0; row < 8; row++) {
    const line: Line = [seg('  ')];
    for (let col = 0; col < 8; col++) line.push(cell(row * 8 + col, 2));
    line.push(seg('  '), ...(legend[row] ?? []));
    grid.push(line);
  }
  if (legend.length > 8) grid[7] = [...grid[7].slice(0, 9), seg(`  +${legend.length - 7} more replicas`, 'muted')];
  const compact: Line[] = [0, 1].map((half) => {
    const line: Line = [seg('  ')];
    for (let n = half * 32; n < half * 32 + 32; n++) line.push(cell(n, 1));
    line.push(seg('  '), ...(legend[half] ? legend[half].slice(1) : []));
    return line;
  });
  return { title, rows: [], fixed: [grid, compact] };
}

function waitingPane(v: AdminQueueView, ui: UiState, width: number): PaneContent {
  const w = v.waiting;
  const explain = ui.explain !== null ? findEntry(v, ui.explain) : null;
  if (explain) return explainPane(explain, ui);
  if (ui.drill) {
    const g = w.groups.find((x) => x.code === ui.drill);
    const entries = g?.entries ?? [];
    const title = paneTitle('waiting', ui.focus === 'waiting', [seg(`› ${ui.drill}`, g?.satisfiable === false ? 'bad' : 'warn'), seg(` ${g?.count ?? 0} entries`), seg(' · e explain · Esc back', 'muted')]);
    const table: CellTable = {
      head: ['step', 'run', 'lane', 'project', 'waiting', 'reason'],
      rows: entries.map((e) => [text(String(e.stepId)), text(String(e.runId), 'accent'), text(e.lane, 'muted'), text(e.fairKey), age(e.waitingMs, ageTone(e.waitingMs)), text(e.verdict.reason, e.verdict.satisfiable ? 'normal' : 'bad')]),
    };
    const t = tableLines(table, width, { caps: [10, 10, 11, 16, 8, 200], prefix: (r) => marker(ui, 'waiting', r) });
    const more = g && g.count > entries.length ? [[seg(`  +${countText(g.count - entries.length)} more in this group (the oldest ${entries.length} listed)`, 'muted')]] : [];
    return { title, head: t.head, rows: [...t.rows, ...more] };
  }
  const unsat = w.groups.filter((g) => !g.satisfiable).reduce((a, g) => a + g.count, 0);
  const title = paneTitle('waiting', ui.focus === 'waiting', [
    seg(`${w.readyEstimated ? '~' : ''}${countText(w.ready)} ready`),
    ...(unsat ? [seg(` · ${countText(unsat)} unsatisfiable`, 'bad')] : []),
    ...(w.sampled ? [seg(` · verdicts of the first ${countText(w.sampleSize)}`, 'muted')] : []),
  ]);
  if (w.groups.length === 0) return { title, rows: [[seg('  queue empty', 'muted')]] };
  const t = tableLines(verdictsTable(v), width, { caps: [24, 10, 8, 12], prefix: (r) => marker(ui, 'waiting', r) });
  return { title, head: t.head, rows: t.rows };
}

function explainPane(e: WaitingEntry, ui: UiState): PaneContent {
  const title = paneTitle('waiting', ui.focus === 'waiting', [seg(`› explain step ${e.stepId}`, 'accent'), seg(' · Esc back', 'muted')]);
  const req = e.requirement ? JSON.stringify(e.requirement) : 'none';
  const rows: Line[] = [
    [seg('  step '), seg(String(e.stepId), 'accent'), seg(` of run ${e.runId}, attempt ${e.attempt}, ${e.lane} lane, project ${e.fairKey}, load ${e.load}, waiting `), seg(durationText(e.waitingMs), ageTone(e.waitingMs))],
    [seg('  verdict '), seg(e.verdict.code, e.verdict.satisfiable ? 'warn' : 'bad', { bold: true }), seg(e.verdict.satisfiable ? ' (dispatches once the gate clears)' : ' (needs an operator or a runner change)', 'muted')],
    [seg(`  ${e.verdict.reason}`)],
    [seg('  placement '), seg(req)],
    [seg('  closest runner '), ...(e.closest ? [seg(e.closest.runner, 'accent'), seg(e.closest.gaps.length ? ` lacks: ${e.closest.gaps.join(', ')}` : ' matches the placement', e.closest.gaps.length ? 'bad' : 'ok')] : [seg('none registered', 'bad')])],
    [seg(`  pools ${e.pools.length ? e.pools.join(', ') : 'none'} · pinned runner ${e.pinnedRunner ?? 'none'}`)],
  ];
  return { title, rows };
}

function runnersPane(v: AdminQueueView, ui: UiState, width: number, registered: number): PaneContent {
  const online = v.runners.filter((r) => r.state !== 'offline');
  const used = online.reduce((a, r) => a + r.load.used, 0);
  const max = online.reduce((a, r) => a + r.load.max, 0);
  const drained = v.runners.filter((r) => r.drained).length;
  const offline = v.runners.length - online.length;
  const title = paneTitle('runners', ui.focus === 'runners', [
    // Filtered, the count is of the runners that match, out of all registered.
    seg(ui.filter ? `${v.runners.length} of ${registered} match · ${online.length} online` : `${v.runners.length} registered · ${online.length} online`),
    ...(offline ? [seg(` · ${offline} offline`, 'bad')] : []),
    ...(drained ? [seg(` · ${drained} drained`, 'warn')] : []),
    seg(` · load ${Math.round(used * 100) / 100}/${Math.round(max * 100) / 100}`),
    seg(` · slots ${online.reduce((a, r) => a + r.slots.used, 0)}/${online.reduce((a, r) => a + r.slots.max, 0)}`),
  ]);
  const base = runnersTable(v);
  const bars = v.runners.map((r) => loadBar(runnerFullness(r), 1, 8));
  const table: CellTable = {
    head: [base.head[0], base.head[1], 'load', '', ...base.head.slice(3)],
    rows: base.rows.map((row, i) => [row[0], row[1], { ...row[2], value: bars[i] }, row[2], ...row.slice(3)]),
  };
  const t = tableLines(table, width, { caps: [18, 12, 8, 9, 6, 8, 24, 9], prefix: (r) => marker(ui, 'runners', r) });
  if (v.runners.length === 0) return { title, rows: [[seg(ui.filter && registered ? `  no runner matches "${ui.filter}"` : '  no runners registered', 'muted')]] };
  return { title, head: t.head, rows: t.rows };
}

// ---- layout ---------------------------------------------------------------------------------

/** Lines a pane would like: its full content. */
function wanted(p: PaneContent): number {
  if (p.fixed) return p.fixed[0].length + 1;
  return 1 + (p.head ? 1 : 0) + p.rows.length;
}

/** Cuts a pane to exactly `h` lines: title, head, the rows around the selection, "+N more". */
function cut(p: PaneContent, h: number, selected: number): Line[] {
  if (h <= 1) return [p.title];
  if (p.fixed) {
    const fit = p.fixed.find((f) => f.length + 1 <= h);
    return fit ? [p.title, ...fit] : [p.title];
  }
  const avail = h - 1;
  if (p.rows.length <= avail - (p.head ? 1 : 0)) return [p.title, ...(p.head ? [p.head] : []), ...p.rows];
  // Cut: keep the head while at least two rows and the "+N more" line still fit.
  const head = p.head && avail >= 4 ? [p.head] : [];
  // A cut list always says how much it leaves out: with room for one line only, that line is "+N more".
  const shown = Math.max(0, avail - head.length - 1);
  const start = Math.min(Math.max(0, selected - shown + 1), p.rows.length - shown);
  const more = p.rows.length - shown;
  return [p.title, ...head, ...p.rows.slice(start, start + shown), [seg(`  +${countText(more)} more`, 'muted')]];
}

/**
 * Gives each pane of a column its height within `rows`: every pane its summary line first, then
 * the focused pane, then the shard grid, then the others in order, each as much as it wants of
 * what is left. A pane left with its summary only is collapsed; the shard grid takes its full 8×8
 * or, when even that does not fit, its 2-row form.
 */
export function allocate(panes: Array<{ id: PaneId; want: number; fixed?: number[] }>, rows: number, focus: PaneId): Map<PaneId, number> {
  const out = new Map<PaneId, number>();
  let left = rows;
  for (const p of panes) {
    if (left <= 0) break;
    out.set(p.id, 1);
    left--;
  }
  // The focused pane first, then the shard grid (its 8×8 is small and fixed), then the rest in order.
  const order = [...panes.filter((p) => p.id === focus), ...panes.filter((p) => p.id !== focus && p.fixed), ...panes.filter((p) => p.id !== focus && !p.fixed)];
  for (const p of order) {
    if (!out.has(p.id) || left <= 0) continue;
    let extra = Math.min(p.want - 1, left);
    if (p.fixed) {
      const h = p.fixed.find((f) => f + 1 <= extra + 1);
      extra = h ? h : 0;
    } else if (extra < 1) extra = 0;
    out.set(p.id, 1 + extra);
    left -= extra;
  }
  return out;
}

function column(contents: Map<PaneId, PaneContent>, ids: PaneId[], rows: number, ui: UiState, width: number): Line[] {
  const panes = ids.map((id) => {
    const c = contents.get(id)!;
    return { id, want: wanted(c), ...(c.fixed ? { fixed: c.fixed.map((f) => f.length) } : {}) };
  });
  const heights = allocate(panes, rows, ui.focus);
  const out: Line[] = [];
  for (const id of ids) {
    const h = heights.get(id);
    if (!h) continue;
    for (const l of cut(contents.get(id)!, h, ui.selected[id])) out.push(clip(l, width));
  }
  return out;
}

function helpLines(): Line[] {
  const keys: Array<[string, string]> = [
    ['Tab ← →', 'next / previous pane (Shift-Tab: previous)'],
    ['↑ ↓', 'move the selection in the pane'],
    ['Enter', 'waiting: list the selected verdict group'],
    ['e', 'waiting: explain the selected entry (its verdict, the closest runner, what it lacks)'],
    ['Esc', 'back, close, cancel'],
    ['/', 'filter by project, run or runner (Enter applies, Esc clears)'],
    ['p', 'pause / resume refreshing'],
    ['d u', 'runners: drain / undrain the selected runner (asks y/n; same lever as fleet drain)'],
    ['w', 'runners: what if the selected runner were drained (undrained if drained): fleet what-if, writes nothing'],
    ['?', 'this help'],
    ['q Ctrl-C', 'quit, terminal restored'],
  ];
  return [[seg('  Keys', 'accent', { bold: true })], ...keys.map(([k, d]): Line => [seg(`  ${k.padEnd(10)}`, 'accent'), seg(d)])];
}

function headerLines(p: ScreenProps, v: AdminQueueView | null): Line[] {
  const { feed, ui } = p;
  const out: Line[] = [];
  const refreshed = feed.fetchedAt !== null ? durationText(Math.max(0, p.now - feed.fetchedAt)) : '-';
  const live = v ? `${v.replicas.live}/${v.replicas.total}` : '-';
  out.push([
    seg('opschain', 'accent', { bold: true }),
    ...(ui.paused ? [seg('  PAUSED', 'warn', { bold: true, inverse: true })] : []),
    ...(ui.filter ? [seg(`  filter: ${ui.filter}`, 'accent')] : []),
    seg(`  ${p.sourceName}`),
    seg(`  ${refreshed} ago`, 'muted'),
    seg('  replicas '),
    seg(live, v && v.replicas.live < v.replicas.total ? 'warn' : 'ok'),
    seg('  leader '),
    seg(v?.leader?.replicaId ?? 'none', v?.leader ? undefined : 'bad'),
  ]);
  if (feed.stale) {
    out.push([seg(` STALE ${durationText(Math.max(0, p.now - feed.stale.since))}: ${feed.stale.cause} — showing the last good snapshot, retrying `, 'bad', { bold: true, inverse: true })]);
  }
  if (v) for (const b of postureBanners(v)) out.push([seg(` ${b.text} `, b.tone, { bold: true, inverse: true })]);
  if (v) for (const t of triggerLines(v)) out.push([seg(t.text, t.tone)]);
  return out;
}

function footerLine(p: ScreenProps): Line {
  const { ui } = p;
  if (ui.editingFilter !== null) return [seg('/', 'accent', { bold: true }), seg(ui.editingFilter), seg('▏', 'accent'), seg('  Enter apply · Esc clear', 'muted')];
  if (ui.confirm) return [seg(` ${ui.confirm.drained ? 'Drain' : 'Undrain'} runner ${ui.confirm.runnerName}? `, 'warn', { bold: true, inverse: true }), seg('  y yes · n no', 'muted')];
  if (ui.message) return [seg(ui.message.text, ui.message.tone)];
  return [seg('Tab pane · ↑↓ select · Enter open · e explain · / filter · p pause · d/u drain · w what-if · ? help · q quit', 'muted')];
}

/** The whole screen as lines: never more than rows − 1 (Ink redraws in place below the height), never wider than columns. */
export function screenLines(p: ScreenProps): Line[] {
  // One column spare: a line filling the last column leaves some terminals' cursor in the margin.
  const width = Math.max(20, p.columns - 1);
  const budget = Math.max(3, p.rows - 1);
  const v = visibleView(p.feed, p.ui);
  const header = headerLines(p, v).slice(0, Math.max(1, budget - 2));
  const footer = footerLine(p);
  const bodyRows = Math.max(0, budget - header.length - 1);
  let body: Line[];
  if (p.ui.help) body = helpLines().slice(0, bodyRows);
  else if (!v) body = [[seg(p.feed.stale ? '  no snapshot yet: the store has not answered' : `  reading ${p.sourceName}…`, p.feed.stale ? 'bad' : 'muted')]];
  else {
    const twoColumns = width >= 120;
    // A wide terminal gives the runners their drain reasons whole: half the width from 160 columns.
    const rightWidth = twoColumns ? Math.max(44, Math.floor(width * (width >= 160 ? 0.5 : 0.4))) : width;
    const leftWidth = twoColumns ? width - rightWidth - 1 : width;
    const contents = new Map<PaneId, PaneContent>([
      ['lanes', lanesPane(v, p.feed, p.ui, leftWidth)],
      ['leases', leasesPane(v, p.ui, leftWidth)],
      ['shards', shardsPane(v, p.feed, p.ui)],
      ['waiting', waitingPane(v, p.ui, leftWidth)],
      ['runners', runnersPane(v, p.ui, rightWidth, p.feed.view?.runners.length ?? v.runners.length)],
    ]);
    if (twoColumns) {
      const left = column(contents, ['lanes', 'leases', 'waiting'], bodyRows, p.ui, leftWidth);
      const right = column(contents, ['shards', 'runners'], bodyRows, p.ui, rightWidth);
      body = [];
      for (let i = 0; i < Math.max(left.length, right.length); i++) body.push([...pad(left[i] ?? [], leftWidth), seg(' '), ...(right[i] ?? [])]);
    } else body = column(contents, [...PANES], bodyRows, p.ui, width);
  }
  return [...header, ...body.slice(0, bodyRows), footer].map((l) => clip(l, width));
}

