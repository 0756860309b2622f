import type { AdminQueueView } from '../views/admin-queue.js';
import { PANES, selectableCount, selectedEntry, type PaneId, type UiState } from './screen.js';

/** A key as Ink reports it, reduced to what the console reads. */
export interface KeyPress {
  input: string;
  upArrow?: boolean;
  downArrow?: boolean;
  leftArrow?: boolean;
  rightArrow?: boolean;
  tab?: boolean;
  shift?: boolean;
  return?: boolean;
  escape?: boolean;
  ctrl?: boolean;
  backspace?: boolean;
  delete?: boolean;
}

export type Effect =
  | { kind: 'quit' }
  | { kind: 'pause'; paused: boolean }
  | { kind: 'drain'; runnerId: string; runnerName: string; drained: boolean }
  | { kind: 'whatIf'; runnerId: string; runnerName: string; drained: boolean }
  | { kind: 'refresh' };

function move(ui: UiState, pane: PaneId, by: number, view: AdminQueueView | null): UiState {
  const n = selectableCount(view, ui, pane);
  const next = Math.max(0, Math.min(Math.max(0, n - 1), ui.selected[pane] + by));
  return { ...ui, selected: { ...ui.selected, [pane]: next } };
}

function cycle(ui: UiState, by: number): UiState {
  const i = PANES.indexOf(ui.focus);
  return { ...ui, focus: PANES[(i + by + PANES.length) % PANES.length], message: null };
}

/**
 * The console's keys as a pure step: the UI state after a key, and what the shell must do
 * (quit, pause, pull a lever). Modal states come first: the filter being typed, a lever waiting
 * for y/n, the help screen.
 */
export function reduceKey(ui: UiState, k: KeyPress, view: AdminQueueView | null): { ui: UiState; effect?: Effect } {
  if (k.ctrl && k.input === 'c') return { ui, effect: { kind: 'quit' } };

  if (ui.editingFilter !== null) {
    if (k.escape) return { ui: { ...ui, editingFilter: null, filter: '' } };
    if (k.return) return { ui: { ...ui, filter: ui.editingFilter.trim(), editingFilter: null, selected: { ...ui.selected, leases: 0, waiting: 0, runners: 0 } } };
    if (k.backspace || k.delete) return { ui: { ...ui, editingFilter: ui.editingFilter.slice(0, -1) } };
    if (k.input && !k.ctrl && !k.upArrow && !k.downArrow && !k.tab) return { ui: { ...ui, editingFilter: ui.editingFilter + k.input } };
    return { ui };
  }

  if (ui.confirm) {
    if (k.input === 'y' || k.input === 'Y') {
      const c = ui.confirm;
      return { ui: { ...ui, confirm: null, message: { text: `${c.drained ? 'draining' : 'undraining'} ${c.runnerName}…`, tone: 'warn' } }, effect: { kind: 'drain', runnerId: c.runnerId, runnerName: c.runnerName, drained: c.drained } };
    }
    if (k.input === 'n' || k.input === 'N' || k.escape || k.input === 'q') return { ui: { ...ui, confirm: null, message: { text: 'cancelled', tone: 'warn' } } };
    return { ui };
  }

  if (ui.help) {
    if (k.input === 'q') return { ui, effect: { kind: 'quit' } };
    return { ui: { ...ui, help: false } };
  }

  if (k.input === 'q') return { ui, effect: { kind: 'quit' } };
  if (k.input === '?') return { ui: { ...ui, help: true } };
  if (k.input === '/') return { ui: { ...ui, editingFilter: ui.filter } };
  if (k.input === 'p') return { ui: { ...ui, paused: !ui.paused }, effect: { kind: 'pause', paused: !ui.paused } };
  if (k.tab) return { ui: cycle(ui, k.shift ? -1 : 1) };
  if (k.rightArrow) return { ui: cycle(ui, 1) };
  if (k.leftArrow) return { ui: cycle(ui, -1) };
  if (k.upArrow) return { ui: move(ui, ui.focus, -1, view) };
  if (k.downArrow) return { ui: move(ui, ui.focus, 1, view) };

  if (k.escape) {
    if (ui.explain !== null) return { ui: { ...ui, explain: null } };
    if (ui.drill) return { ui: { ...ui, drill: null, selected: { ...ui.selected, waiting: 0 } } };
    if (ui.filter) return { ui: { ...ui, filter: '' } };
    return { ui: { ...ui, message: null } };
  }

  if (ui.focus === 'waiting' && view) {
    if (k.return && !ui.drill && ui.explain === null) {
      const g = view.waiting.groups[ui.selected.waiting];
      if (g) return { ui: { ...ui, drill: g.code, selected: { ...ui.selected, waiting: 0 } } };
    }
    if (k.input === 'e' || (k.return && ui.drill)) {
      const e = selectedEntry(view, ui);
      if (e) return { ui: { ...ui, explain: e.stepId } };
    }
  }

  if (ui.focus === 'runners' && view && (k.input === 'd' || k.input === 'u')) {
    const r = view.runners[ui.selected.runners];
    if (!r) return { ui: { ...ui, message: { text: 'no runner selected', tone: 'warn' } } };
    const drained = k.input === 'd';
    if (r.drainedBy === 'group' && !drained) return { ui: { ...ui, message: { text: `${r.name} is drained through its group ${r.group}: undrain the group with fleet undrain --group`, tone: 'warn' } } };
    return { ui: { ...ui, confirm: { runnerId: r.id, runnerName: r.name, drained } } };
  }
  if (ui.focus === 'runners' && view && k.input === 'w') {
    const r = view.runners[ui.selected.runners];
    if (!r) return { ui: { ...ui, message: { text: 'no runner selected', tone: 'warn' } } };
    // The lever d/u would pull on it: drain it, or undrain it when it is drained itself.
    const drained = !r.drained || r.drainedBy === 'group';
    return { ui: { ...ui, message: { text: `what if ${r.name} were ${drained ? 'drained' : 'undrained'}…`, tone: 'warn' } }, effect: { kind: 'whatIf', runnerId: r.id, runnerName: r.name, drained } };
  }
  if (k.input === 'w' && ui.focus !== 'runners') return { ui: { ...ui, message: { text: 'w tries a drain of the selected runner: Tab to the Runners pane first', tone: 'warn' } } };
  if ((k.input === 'd' || k.input === 'u') && ui.focus !== 'runners') return { ui: { ...ui, message: { text: 'd/u drain the selected runner: Tab to the Runners pane first', tone: 'warn' } } };
  return { ui };
}
