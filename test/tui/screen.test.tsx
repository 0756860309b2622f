/* eslint-disable no-control-regex -- the frames are asserted on their ANSI escapes */
import chalk from 'chalk';
import { EventEmitter } from 'node:events';
import { render as inkRender } from 'ink';
import { render } from 'ink-testing-library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reduceKey, type KeyPress } from '../../src/tui/keys.js';
import { whatIfLine } from '../../src/views/fleet-demand.js';
import { INITIAL_UI, screenLines, type UiState } from '../../src/tui/screen.js';
import { Screen } from '../../src/tui/screen-view.js';
import type { FeedState } from '../../src/tui/feed.js';
import { AT, busyView, deepView, emptyView, feedOf } from './fixtures.js';

const strip = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');

/** ink-testing-library's terminal is 100 columns wide; a wider one renders through Ink the same way. */
function renderWide(node: React.ReactElement, columns: number): { lastFrame: () => string | undefined; unmount: () => void } {
  const stdout = Object.assign(new EventEmitter(), { columns, frames: [] as string[], write(f: string) { this.frames.push(f); return true; } });
  const stdin = Object.assign(new EventEmitter(), { isTTY: true, setEncoding() {}, setRawMode() {}, resume() {}, pause() {}, ref() {}, unref() {}, read: () => null });
  const stderr = Object.assign(new EventEmitter(), { write: () => true });
  const app = inkRender(node, { stdout: stdout as any, stdin: stdin as any, stderr: stderr as any, debug: true, exitOnCtrlC: false, patchConsole: false });
  return { lastFrame: () => stdout.frames[stdout.frames.length - 1], unmount: () => app.unmount() };
}

function frame(feed: FeedState, opts: { rows?: number; columns?: number; ui?: Partial<UiState>; color?: boolean } = {}): { raw: string; lines: string[] } {
  const node = <Screen feed={feed} ui={{ ...INITIAL_UI, ...opts.ui }} rows={opts.rows ?? 24} columns={opts.columns ?? 80} now={AT} sourceName="db.example:5432/ops" color={opts.color ?? false} />;
  const { lastFrame, unmount } = (opts.columns ?? 80) > 100 ? renderWide(node, opts.columns!) : render(node);
  const raw = lastFrame() ?? '';
  unmount();
  return { raw, lines: strip(raw).split('\n') };
}

// Colour as a real terminal would get it, so NO_COLOR is tested against codes that could appear.
const level = chalk.level;
beforeAll(() => {
  chalk.level = 1;
});
afterAll(() => {
  chalk.level = level;
});

function fits(lines: string[], rows: number, columns: number): void {
  expect(lines.length).toBeLessThanOrEqual(rows - 1);
  for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(columns);
}

describe('the dashboard screen', () => {
  it('fits 80×24: header, lanes with sparklines, a lease, the 8×8 shard grid, collapsed panes as summary lines', () => {
    const { lines } = frame(feedOf(busyView()));
    fits(lines, 24, 80);
    const text = lines.join('\n');
    expect(lines[0]).toMatch(/^opschain\s+db\.example:5432\/ops\s+0\.4s ago\s+replicas 2\/2\s+leader rep-a/);
    expect(text).toMatch(/bulk\s+7 ready\s+1 leased\s+10m00s\s+[▁▂▃▄▅▆▇█]{10,}/);
    expect(text).toMatch(/Leases\s+2 live/);
    expect(text).toMatch(/11 migr…\s+5 deploy…\s+acme\/pro…\s+build-1\s+rep-a\s+running\s+2m00s\s+40s/);
    // The grid: eight rows of eight owner letters, with the legend beside it.
    const grid = lines.filter((l) => /^ {2}([AB] ){7}[AB]/.test(l));
    expect(grid).toHaveLength(8);
    expect(grid[0]).toMatch(/A B A B A B A B\s+A rep-a 32 live leader/);
    // Short of room, the panes below keep one summary line each.
    expect(text).toMatch(/Waiting\s+10 ready · 2 unsatisfiable/);
    expect(text).toMatch(/Runners\s+2 registered · 2 online · load 5\/8/);
    expect(lines[lines.length - 1]).toMatch(/^Tab pane/);
  });

  it('grows with a 200×60 terminal: two columns, every pane expanded', () => {
    const { lines } = frame(feedOf(busyView()), { rows: 60, columns: 200 });
    fits(lines, 60, 200);
    const text = lines.join('\n');
    expect(lines.some((l) => /Lanes.*Shards/.test(l))).toBe(true);
    expect(text).toMatch(/acme\s+weight 2\s+pass 15\.7M\s+share 60%/);
    expect(text).toMatch(/12 smoke\s+6 deploy-api\s+zeta\/prod\/api\s+build-2\s+rep-b\s+offered/);
    expect(text).toMatch(/no_runner_matches\s+2\s+10m00s/);
    expect(text).toMatch(/build-2\s+linux\s+████████\s+4\/4\s+1\/2\s+watch/);
    expect(lines.filter((l) => /([AB] ){7}[AB]/.test(l))).toHaveLength(8);
  });

  const threeRunners = () => {
    const v = busyView();
    v.runners = [...v.runners, { ...v.runners[0], id: 'r-3', name: 'build-3', drained: true, drainedBy: 'runner', drainReason: 'drained from rack 3 for a disk swap' }];
    return v;
  };

  it('a filter counts the runners that match out of all registered, never "0 registered"', () => {
    const text = frame(feedOf(threeRunners()), { rows: 60, columns: 200, ui: { filter: 'gamma' } }).lines.join('\n');
    expect(text).toMatch(/Runners\s+0 of 3 match/);
    expect(text).toMatch(/no runner matches "gamma"/);
    expect(text).not.toMatch(/registered/);
    expect(frame(feedOf(threeRunners()), { rows: 60, columns: 200, ui: { filter: 'build-3' } }).lines.join('\n')).toMatch(/Runners\s+1 of 3 match/);
  });

  it('a cut runners list always says how many it leaves out, at every height', () => {
    for (let rows = 14; rows <= 40; rows++) {
      const { lines } = frame(feedOf(threeRunners()), { rows, columns: 80 });
      fits(lines, rows, 80);
      // The Runners pane is the last one: its title, then what it lists, then the footer.
      const pane = lines.slice(lines.findIndex((l) => /^\s+Runners\s/.test(l)) + 1, -1);
      const listed = pane.filter((l) => /^\s+build-\d\s+linux/.test(l)).length;
      if (pane.length > 0 && listed < 3) expect(pane.join('\n'), `${rows} rows`).toContain(`+${3 - listed} more`);
    }
  });

  it('uses a wide terminal: a drain reason whole, the runners listed', () => {
    const { lines } = frame(feedOf(threeRunners()), { rows: 60, columns: 200 });
    fits(lines, 60, 200);
    expect(lines.join('\n')).toMatch(/build-3\s+linux.*yes: drained from rack 3 for a disk swap/);
  });

  it('keeps the 8×8 shard grid at 80 columns when other panes want the rows', () => {
    const v = busyView();
    const lease = v.leases.items[0];
    v.leases = { total: 12, shown: 12, items: Array.from({ length: 12 }, (_, i) => ({ ...lease, stepId: 100 + i })) };
    const { lines } = frame(feedOf(v), { rows: 24, columns: 80 });
    fits(lines, 24, 80);
    expect(lines.filter((l) => /^ {2}([AB] ){7}[AB]/.test(l))).toHaveLength(8);
    expect(lines.some((l) => /([AB]){32}/.test(l))).toBe(false);
  });

  it('fits the sparklines in their pane: no lane line is cut short', () => {
    for (const columns of [80, 100, 120, 200]) {
      const { lines } = frame(feedOf(busyView()), { rows: 40, columns });
      const lanes = lines.filter((l) => /\b(system|interactive|bulk)\s+\d+ ready/.test(l));
      expect(lanes.length, `${columns} columns`).toBe(3);
      for (const l of lanes) expect(l, `${columns} columns`).toMatch(/ready\s+\d+ leased\s+\S+\s+[▁▂▃▄▅▆▇█]+(\s|$)/);
      for (const l of lanes) expect(l.slice(0, columns > 120 ? Math.floor((columns - 1) * 0.5) : columns), `${columns} columns`).not.toContain('…');
    }
  });

  it('shows a runner at its max parallel steps as full: slots beside load, a full bar', () => {
    const v = busyView();
    v.runners = [{ ...v.runners[0], load: { used: 1, max: 2 }, slots: { used: 1, max: 1 }, leases: 1 }, v.runners[1]];
    const { lines } = frame(feedOf(v), { rows: 60, columns: 200 });
    const text = lines.join('\n');
    expect(text).toMatch(/build-1\s+linux\s+████████\s+1\/2\s+1\/1\s+online/);
    expect(text).toMatch(/Runners\s+2 registered · 2 online · load 5\/6 · slots 2\/3/);
  });

  it('shows the postures as banners: platform halted, fleet quiesced, drained runners', () => {
    const v = busyView();
    v.postures = { ...v.postures, halted: true, fleetQuiesced: true, quiesced: true, reason: 'incident 42', actor: 'alice', drains: [{ kind: 'runner', target: 'r-2', name: 'build-2', reason: 'kernel', actor: 'bob', since: null, ageMs: null }] };
    const { lines, raw } = frame(feedOf(v));
    fits(lines, 24, 80);
    expect(lines[1]).toMatch(/PLATFORM HALTED: incident 42 \(alice\)/);
    expect(lines[2]).toMatch(/FLEET QUIESCED: incident 42/);
    expect(lines[3]).toMatch(/1 runner drained/);
    // NO_COLOR: no colour codes at all, the banners still stand out by weight and inverse video.
    expect(raw).not.toMatch(/\x1b\[(3[0-7]|9[0-7]|38;)/);
    expect(raw).toMatch(/\x1b\[7m/);
    expect(frame(feedOf(v), { color: true }).raw).toMatch(/\x1b\[31m/);
  });

  it('shows an empty queue plainly', () => {
    const { lines } = frame(feedOf(emptyView()), { rows: 40, columns: 100 });
    const text = lines.join('\n');
    expect(text).toMatch(/Lanes\s+ready 0 · leased 0 · oldest -/);
    expect(text).toMatch(/Leases\s+0 live/);
    expect(text).toMatch(/queue empty/);
    expect(text).toMatch(/no runners registered/);
  });

  it('keeps 10,000 waiting entries inside the frame: counts, estimates and "+N more"', () => {
    const feed = feedOf(deepView());
    const groups = frame(feed, { ui: { focus: 'waiting' } });
    fits(groups.lines, 24, 80);
    expect(groups.lines.join('\n')).toMatch(/Waiting\s+~10,003 ready · 10,000 unsatisfiable · verdicts of the first 1,000/);
    expect(groups.lines.join('\n')).toMatch(/bulk\s+~10,000 ready/);
    const listed = frame(feed, { ui: { focus: 'waiting', drill: 'no_runner_matches' } });
    fits(listed.lines, 24, 80);
    const text = listed.lines.join('\n');
    expect(text).toMatch(/› no_runner_matches 10000 entries/);
    expect(text).toMatch(/\+\d+ more/);
    const explained = frame(feed, { ui: { focus: 'waiting', drill: 'no_runner_matches', explain: 1000 } });
    expect(explained.lines.join('\n')).toMatch(/closest runner build-1 lacks: no label gpu/);
  });

  it('survives a store outage: a stale banner with its age and cause over the last good snapshot', () => {
    const stale = feedOf(busyView(), { fetchedAt: AT - 12_400, stale: { since: AT - 12_000, cause: 'connect ECONNREFUSED 127.0.0.1:5432' } });
    const { lines } = frame(stale);
    fits(lines, 24, 80);
    expect(lines[1]).toMatch(/STALE 12s: connect ECONNREFUSED 127\.0\.0\.1:5432/);
    expect(lines.join('\n')).toMatch(/bulk\s+7 ready/);
    const never = frame(feedOf(null, { stale: { since: AT - 3_000, cause: 'connect ECONNREFUSED' } }));
    expect(never.lines.join('\n')).toMatch(/no snapshot yet/);
  });

  it('never draws taller than the terminal, however small', () => {
    for (const [rows, columns] of [[24, 80], [12, 60], [8, 40], [5, 30], [30, 120], [60, 200]]) {
      for (const focus of ['lanes', 'leases', 'shards', 'waiting', 'runners'] as const) {
        const lines = screenLines({ feed: feedOf(deepView()), ui: { ...INITIAL_UI, focus }, rows, columns, now: AT, sourceName: 'db' });
        expect(lines.length, `${rows}x${columns} ${focus}`).toBeLessThanOrEqual(rows - 1);
        for (const l of lines) expect(l.reduce((a, s) => a + s.text.length, 0)).toBeLessThan(columns);
      }
    }
  });

  it('flashes a shard that changed owner at the last refresh', () => {
    const feed = feedOf(busyView(), { moved: new Map([[0, 'rep-b']]) });
    expect(frame(feed).lines.join('\n')).toMatch(/1 moved/);
    const lines = screenLines({ feed, ui: INITIAL_UI, rows: 24, columns: 80, now: AT, sourceName: 'db' });
    const flashed = lines.flat().filter((s) => s.inverse && /^[AB] $/.test(s.text));
    expect(flashed).toHaveLength(1);
    expect(flashed[0]).toMatchObject({ text: 'A ', owner: 0 });
  });
});

describe('the dashboard keys', () => {
  const view = busyView();
  const press = (ui: UiState, ...keys: KeyPress[]) => keys.reduce<{ ui: UiState; effects: unknown[] }>((acc, k) => {
    const r = reduceKey(acc.ui, k, view);
    return { ui: r.ui, effects: r.effect ? [...acc.effects, r.effect] : acc.effects };
  }, { ui, effects: [] });

  it('moves between panes with Tab, Shift-Tab and arrows', () => {
    expect(press(INITIAL_UI, { input: '', tab: true }).ui.focus).toBe('leases');
    expect(press(INITIAL_UI, { input: '', tab: true, shift: true }).ui.focus).toBe('runners');
    expect(press(INITIAL_UI, { input: '', rightArrow: true }, { input: '', rightArrow: true }).ui.focus).toBe('shards');
  });

  it('lists a verdict group with Enter, explains with e, backs out with Esc', () => {
    const on = { ...INITIAL_UI, focus: 'waiting' as const };
    const listed = press(on, { input: '', return: true });
    expect(listed.ui.drill).toBe('no_runner_matches');
    const explained = press(listed.ui, { input: '', downArrow: true }, { input: 'e' });
    expect(explained.ui.explain).toBe(1001);
    const back = press(explained.ui, { input: '', escape: true }, { input: '', escape: true });
    expect(back.ui).toMatchObject({ explain: null, drill: null });
  });

  it('w on the Runners pane asks what a drain of the selected runner would do; elsewhere it says where to go', () => {
    const on = { ...INITIAL_UI, focus: 'runners' as const };
    expect(press(on, { input: 'w' }).effects).toEqual([{ kind: 'whatIf', runnerId: 'r-1', runnerName: 'build-1', drained: true }]);
    const elsewhere = press(INITIAL_UI, { input: 'w' });
    expect(elsewhere.effects).toEqual([]);
    expect(elsewhere.ui.message?.text).toMatch(/Runners pane/);
    const line = whatIfLine('build-1', true, {
      starts: [],
      startsBefore: 2,
      stays: { total: 9, byReason: {} as never, shown: [] },
      orphaned: [{ stepId: 1, runId: 1, runnerId: 'r-1', executing: true, runner: 'build-1' }],
      stalled: [],
      demand: { before: { capacity: 3 } as never, after: { capacity: 5 } as never, groups: [] },
    });
    expect(line).toBe('what if build-1 were drained: 0 start next tick (2 now); 9 wait, 5 for capacity (3 now); 1 running step left with no other runner (nothing changed)');
  });

  it('filters with /, pauses with p, quits with q and Ctrl-C', () => {
    const typed = press(INITIAL_UI, { input: '/' }, { input: 'a' }, { input: 'c' }, { input: 'x' }, { input: '', backspace: true }, { input: '', return: true });
    expect(typed.ui).toMatchObject({ filter: 'ac', editingFilter: null });
    expect(press(INITIAL_UI, { input: 'p' }).effects).toEqual([{ kind: 'pause', paused: true }]);
    expect(press(INITIAL_UI, { input: 'q' }).effects).toEqual([{ kind: 'quit' }]);
    expect(press(INITIAL_UI, { input: 'c', ctrl: true }).effects).toEqual([{ kind: 'quit' }]);
    // While typing a filter, q is a letter, not quit.
    expect(press({ ...INITIAL_UI, editingFilter: '' }, { input: 'q' }).effects).toEqual([]);
  });

  it('drains the selected runner only after y, and not at all after n', () => {
    const on = { ...INITIAL_UI, focus: 'runners' as const };
    const asked = press(on, { input: '', downArrow: true }, { input: 'd' });
    expect(asked.ui.confirm).toEqual({ runnerId: 'r-2', runnerName: 'build-2', drained: true });
    expect(asked.effects).toEqual([]);
    expect(press(asked.ui, { input: 'y' }).effects).toEqual([{ kind: 'drain', runnerId: 'r-2', runnerName: 'build-2', drained: true }]);
    expect(press(asked.ui, { input: 'n' })).toMatchObject({ effects: [], ui: { confirm: null } });
    expect(press(INITIAL_UI, { input: 'd' }).ui.message?.text).toMatch(/Runners pane/);
  });
});
