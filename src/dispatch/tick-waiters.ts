import type { Waiter } from '../core/entry.js';
import type { Delivery } from '../core/plan.js';
import type { ParkedRunnerRow } from '../store/fleet.js';
import type { ParkedAcquire } from './waiters.js';

/**
 * The acquire calls a tick plans over, one waiter each, and what the tick has planned for their
 * runners on top of what the store showed: slots taken, load added, the scoped run taken up.
 */
export class TickWaiters {
  readonly all: Waiter[] = [];
  /** The acquire call each waiter stands for: an offer goes to the very call it was planned on. */
  readonly callOf = new Map<Waiter, ParkedAcquire>();
  /** runner id → the run-scoped run it executes (store) or was just handed (this tick). */
  readonly runnerRuns = new Map<string, number>();
  private readonly plannedLoad = new Map<string, number>();

  constructor(private readonly taken?: Map<ParkedAcquire, number>) {}

  add(calls: ParkedAcquire[], rows: ParkedRunnerRow[]): void {
    const byId = new Map(rows.map((r) => [r.runnerId, r]));
    for (const a of calls) {
      const p = byId.get(a.runner.id);
      if (!p) continue;
      // A runner this tick already planned for carries that load, which the store does not show yet.
      const w: Waiter = {
        runnerId: a.runner.id,
        runnerName: a.runner.name,
        group: p.group,
        labels: p.labels,
        executors: p.executors,
        groupAttributes: p.groupAttributes,
        exclusive: p.exclusive,
        maxLoad: p.maxLoad,
        runningLoad: p.runningLoad + (this.plannedLoad.get(p.runnerId) ?? 0),
        slots: a.slots - (this.taken?.get(a) ?? 0),
        onlyRunId: a.onlyRunId,
        drained: p.drained,
      };
      this.all.push(w);
      this.callOf.set(w, a);
      if (p.scopedRunId !== null && !this.runnerRuns.has(p.runnerId)) this.runnerRuns.set(p.runnerId, p.scopedRunId);
    }
  }

  open(): Waiter[] {
    return this.all.filter((w) => w.slots > 0 && !w.drained);
  }

  /** The plan's waiter is one acquire call: it has one slot fewer, and its runner's load grows on every call it has here. */
  planned(d: Delivery, scoped: boolean): void {
    d.waiter.slots -= 1;
    this.plannedLoad.set(d.waiter.runnerId, (this.plannedLoad.get(d.waiter.runnerId) ?? 0) + d.entry.load);
    for (const w of this.all) if (w.runnerId === d.waiter.runnerId) w.runningLoad += d.entry.load;
    if (scoped) this.runnerRuns.set(d.waiter.runnerId, d.entry.runId);
  }
}

export const runnerIdsOf = (calls: ParkedAcquire[]) => [...new Set(calls.map((a) => a.runner.id))];
/** The offers these calls (or waiters) still have room for. */
export const slotsOf = (xs: Array<{ slots: number }>) => xs.reduce((n, x) => n + x.slots, 0);
