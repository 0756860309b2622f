import type { FleetRunnerRow } from '../store/fleet.js';
import { age, text, type Cell, type CellTable, type Tone } from './cells.js';

/** One runner of the registry, as `fleet runners --json` and the dashboard show it. */
export interface RunnerView {
  id: string;
  name: string;
  group: string | null;
  labels: string[];
  executors: string[];
  site: string | null;
  state: 'online' | 'watch' | 'offline';
  /** Drained itself or through its group. */
  drained: boolean;
  drainedBy: 'runner' | 'group' | null;
  drainReason: string | null;
  load: { used: number; max: number };
  /** Parallel steps: live leases over the runner's `--max-parallel-steps`. */
  slots: { used: number; max: number };
  leases: number;
  lastSeenAt: string;
  lastSeenAgeMs: number;
  /** The registration token it registered with (`tokens list` shows the groups it names), or null. */
  registrationToken: string | null;
}

export interface RunnersView {
  at: string;
  summary: { total: number; online: number; watch: number; offline: number; drained: number; loadUsed: number; loadMax: number; slotsUsed: number; slotsMax: number };
  runners: RunnerView[];
}

/** The registry as people read it: every runner with its group, load, state, drain and last contact. */
export function buildRunners(runners: FleetRunnerRow[], now: Date): RunnersView {
  const items: RunnerView[] = runners.map((r) => ({
    id: r.runnerId,
    name: r.runnerName,
    group: r.group,
    labels: r.labels,
    executors: r.executors,
    site: r.site,
    state: (r.state === 'watch' || r.state === 'offline' ? r.state : 'online') as RunnerView['state'],
    drained: r.drained,
    drainedBy: r.runnerDrained ? 'runner' : r.groupDrained ? 'group' : null,
    drainReason: r.drainReason,
    load: { used: r.runningLoad, max: r.maxLoad },
    slots: { used: r.leases, max: r.maxParallelSteps },
    leases: r.leases,
    lastSeenAt: r.lastSeenAt.toISOString(),
    lastSeenAgeMs: Math.max(0, now.getTime() - r.lastSeenAt.getTime()),
    registrationToken: r.registrationTokenId,
  }));
  const online = items.filter((r) => r.state !== 'offline');
  return {
    at: now.toISOString(),
    summary: {
      total: items.length,
      online: items.filter((r) => r.state === 'online').length,
      watch: items.filter((r) => r.state === 'watch').length,
      offline: items.filter((r) => r.state === 'offline').length,
      drained: items.filter((r) => r.drained).length,
      loadUsed: online.reduce((a, r) => a + r.load.used, 0),
      loadMax: online.reduce((a, r) => a + r.load.max, 0),
      slotsUsed: online.reduce((a, r) => a + r.slots.used, 0),
      slotsMax: online.reduce((a, r) => a + r.slots.max, 0),
    },
    runners: items,
  };
}

const stateTone = (s: RunnerView['state']): Tone => (s === 'online' ? 'ok' : s === 'watch' ? 'warn' : 'bad');

/** Load used over max: warn when full, muted when idle. */
export function loadTone(used: number, max: number): Tone {
  if (max <= 0) return 'muted';
  if (used >= max) return 'warn';
  return used === 0 ? 'muted' : 'ok';
}

/** Load used over max; warn as well when its parallel steps are all taken (it takes nothing more, whatever the load). */
export function runnerLoadCell(r: RunnerView): Cell {
  const tone = r.slots.used >= r.slots.max && r.slots.max > 0 ? 'warn' : loadTone(r.load.used, r.load.max);
  return { value: `${Math.round(r.load.used * 100) / 100}/${Math.round(r.load.max * 100) / 100}`, unit: 'text', tone };
}

/** Parallel steps in use over the runner's maximum: warn when full. */
export function runnerSlotsCell(r: RunnerView): Cell {
  return { value: `${r.slots.used}/${r.slots.max}`, unit: 'text', tone: loadTone(r.slots.used, r.slots.max) };
}

/** How full a runner is, 0–1: the fuller of load and parallel steps (a runner at its max parallel steps is full). */
export function runnerFullness(r: RunnerView): number {
  const load = r.load.max > 0 ? r.load.used / r.load.max : 1;
  const slots = r.slots.max > 0 ? r.slots.used / r.slots.max : 1;
  return Math.min(1, Math.max(load, slots));
}

/** name, group, load, slots (parallel steps used/max), state, drained, last seen; with `token`, the registration token last. */
export function runnersTable(v: Pick<RunnersView, 'runners'>, opts: { token?: boolean } = {}): CellTable {
  const table = {
    head: ['runner', 'group', 'load', 'slots', 'state', 'drained', 'last seen'],
    rows: v.runners.map((r) => [
      text(r.name, 'accent'),
      text(r.group ?? '-', r.group ? 'normal' : 'muted'),
      runnerLoadCell(r),
      runnerSlotsCell(r),
      text(r.state, stateTone(r.state)),
      text(r.drained ? `${r.drainedBy === 'group' ? 'group' : 'yes'}${r.drainReason ? `: ${r.drainReason}` : ''}` : '', r.drained ? 'warn' : 'muted'),
      age(r.lastSeenAgeMs, r.state === 'offline' ? 'bad' : r.state === 'watch' ? 'warn' : 'muted'),
    ]),
  };
  if (!opts.token) return table;
  return { head: [...table.head, 'registered with'], rows: table.rows.map((row, i) => [...row, text(v.runners[i].registrationToken ?? '-', 'muted')]) };
}
