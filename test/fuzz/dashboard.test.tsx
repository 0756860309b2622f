import chalk from 'chalk';
import { EventEmitter } from 'node:events';
import { render as inkRender } from 'ink';
import { render } from 'ink-testing-library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INITIAL_UI, type UiState } from '../../src/tui/screen.js';
import { Screen } from '../../src/tui/screen-view.js';
import type { AdminQueueView } from '../../src/views/admin-queue.js';
import { AT, busyView, feedOf } from '../tui/fixtures.js';

/**
 * The dashboard given a snapshot whose every stored string carries escape sequences (OSC 52,
 * CSI in 7- and 8-bit form, a carriage return, a bidi override): every frame, in every pane and
 * state, shows them as text. Colour is off (chalk level 0), so Ink writes no escape of its own
 * and any control character in a frame is a leak.
 */
const SEQUENCES = ['\u001b]52;c;b3duZWQ=\u0007', '\u001b[2K', '\u009b2K', '\r', '\u007f', '\u202e'];
const evil = (tag: string) => `${tag}${SEQUENCES.join('')}`;
// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u;

function hostileView(): AdminQueueView {
  const v = busyView();
  v.postures = { ...v.postures, halted: true, fleetQuiesced: true, quiesced: true, reason: evil('halt'), actor: evil('actor'), drains: [{ kind: 'group', target: evil('grp'), name: evil('grp'), reason: evil('drain'), actor: evil('bob'), since: null, ageMs: null }] };
  v.lanes = v.lanes.map((l) => ({ ...l, projects: l.projects.map((p) => ({ ...p, fairKey: evil('proj') })) }));
  v.pools = [{ name: evil('pool'), held: 1, limit: 2 }];
  v.leases = { ...v.leases, items: v.leases.items.map((l) => ({ ...l, step: evil('step'), run: evil('run'), target: evil('target'), project: evil('proj'), runner: evil('runner') })) };
  v.runners = v.runners.map((r) => ({ ...r, name: evil('runner'), group: evil('group'), labels: [evil('label')], drained: true, drainedBy: 'runner' as const, drainReason: evil('reason') }));
  v.waiting = {
    ...v.waiting,
    groups: v.waiting.groups.map((g) => ({ ...g, entries: g.entries.map((e) => ({ ...e, fairKey: evil('proj'), verdict: { ...e.verdict, reason: evil('verdict'), runner: evil('runner') }, closest: { runner: evil('runner'), gaps: [evil('gap')] } })) })),
  };
  return v;
}

function wideFrame(node: React.ReactElement, columns: number): string {
  const stdout = Object.assign(new EventEmitter(), { columns, frames: [] as string[], write(f: string) { this.frames.push(f); return true; } });
  const stdin = Object.assign(new EventEmitter(), { isTTY: true, setEncoding() {}, setRawMode() {}, resume() {}, pause() {}, ref() {}, unref() {}, read: () => null });
  const stderr = Object.assign(new EventEmitter(), { write: () => true });
  const app = inkRender(node, { stdout: stdout as never, stdin: stdin as never, stderr: stderr as never, debug: true, exitOnCtrlC: false, patchConsole: false });
  const frame = stdout.frames[stdout.frames.length - 1] ?? '';
  app.unmount();
  return frame;
}

function frame(view: AdminQueueView, ui: Partial<UiState>, rows: number, columns: number): string {
  const node = <Screen feed={feedOf(view)} ui={{ ...INITIAL_UI, ...ui }} rows={rows} columns={columns} now={AT} sourceName={evil('db')} color={false} />;
  if (columns > 100) return wideFrame(node, columns);
  const { lastFrame, unmount } = render(node);
  const out = lastFrame() ?? '';
  unmount();
  return out;
}

const level = chalk.level;
beforeAll(() => {
  chalk.level = 0;
});
afterAll(() => {
  chalk.level = level;
});

describe('fuzz: the dashboard with a hostile snapshot', () => {
  const states: Array<[string, Partial<UiState>]> = [
    ['the overview', {}],
    ['the leases pane', { focus: 'leases' }],
    ['the waiting pane', { focus: 'waiting' }],
    ['a waiting group listed', { focus: 'waiting', drill: 'no_runner_matches' }],
    ['an entry explained', { focus: 'waiting', drill: 'no_runner_matches', explain: 0 }],
    ['the runners pane', { focus: 'runners' }],
    ['a drain to confirm', { focus: 'runners', confirm: { runnerId: 'r-1', runnerName: evil('runner'), drained: false } }],
    ['a message', { message: { text: evil('message'), tone: 'bad' } }],
    ['a filter', { filter: evil('filter') }],
  ];
  for (const [name, ui] of states) {
    it(`${name}: no raw control character in any frame, the stored text shown escaped`, () => {
      const frames = [frame(hostileView(), ui, 24, 80), frame(hostileView(), ui, 60, 200)];
      for (const f of frames) {
        const m = RAW.exec(f);
        expect(m ? `U+${m[0].charCodeAt(0).toString(16).padStart(4, '0')} near ${JSON.stringify(f.slice(Math.max(0, m.index - 30), m.index + 30))}` : undefined).toBeUndefined();
      }
      // Somewhere on the wide screen a hostile name is shown as text.
      expect(frames[1]).toMatch(/\\x1b\]52|\\x1b\[2K|\\u009b|\\u202e/);
    });
  }
});
