import type { QueueEntry } from '../core/entry.js';
import type { Delivery, PlanInput, PoolState } from '../core/plan.js';
import type { FairShare } from '../core/stride.js';
import { leasesOutstandingByRun, pinsForRuns } from '../store/leases.js';
import type { PoolClient } from '../store/pool.js';
import { poolStateRead } from '../store/pools.js';

/**
 * What one attempt of a tick has seen in the store and planned on top of it, page after page:
 * the next page's plan counts both, so a pin binds its siblings and no run cap or pool limit is
 * overrun. Each run and pool is read from the store once per attempt.
 *
 *  - `stored`: what the store showed for the runs (pins, steps out) and pools of the claims;
 *  - `pinned`: runs this tick pins (their pins are written before its deliveries);
 *  - `offered`: per run-scoped run, the steps this tick hands out;
 *  - `held`: per pool, the holds this tick takes;
 *  - `deliveries`, in plan order, and `fair`, the tick's copy of the fair-share state charged as it plans
 *    (the dispatcher's own is charged only for deliveries that commit).
 */
export class TickLedger {
  readonly deliveries: Delivery[] = [];
  readonly pinned = new Map<number, string>();
  readonly fair: FairShare;
  private readonly offered = new Map<number, number>();
  private readonly held = new Map<string, number>();
  private readonly stored = {
    pins: new Map<number, string>(),
    out: new Map<number, number>(),
    pools: new Map() as PoolState,
    runsRead: new Set<number>(),
    poolsRead: new Set<string>(),
  };

  constructor(fair: FairShare) {
    this.fair = fair.clone();
  }

  /** Reads what the store shows for the runs and pools of `batch` that this attempt has not read yet. */
  async read(client: PoolClient, batch: QueueEntry[]): Promise<void> {
    const { stored } = this;
    // Only run-scoped runs are ever pinned or capped (the scope is frozen on every entry of the
    // run): a tick with no run-scoped claim reads neither.
    const newRuns = [...new Set(batch.filter((c) => c.runScope && !stored.runsRead.has(c.runId)).map((c) => c.runId))];
    if (newRuns.length > 0) {
      for (const [run, runner] of await pinsForRuns(client, newRuns)) stored.pins.set(run, runner);
      for (const [run, n] of await leasesOutstandingByRun(client, newRuns)) stored.out.set(run, n);
      for (const run of newRuns) stored.runsRead.add(run);
    }
    const newPools = [...new Set(batch.flatMap((c) => c.pools))].filter((name) => !stored.poolsRead.has(name));
    if (newPools.length > 0) {
      for (const [name, p] of await poolStateRead(client, newPools)) stored.pools.set(name, p);
      for (const name of newPools) stored.poolsRead.add(name);
    }
  }

  /** The store's view with this tick's plans on top: what the next page is planned against. */
  planInput(): Pick<PlanInput, 'pins' | 'outstandingByRun' | 'pools'> {
    const { stored } = this;
    const pins = new Map([...stored.pins, ...this.pinned]);
    const outstandingByRun = new Map(stored.out);
    for (const [run, n] of this.offered) outstandingByRun.set(run, (outstandingByRun.get(run) ?? 0) + n);
    const pools: PoolState = new Map([...stored.pools].map(([name, p]) => [name, { limit: p.limit, held: p.held + (this.held.get(name) ?? 0) }]));
    return { pins, outstandingByRun, pools };
  }

  /**
   * Records a planned delivery against the view it was planned on (`planned`): returns whether
   * its run is scoped (pinned or capped), which its runner then executes.
   */
  record(d: Delivery, planned: Pick<PlanInput, 'pins'>): boolean {
    this.deliveries.push(d);
    this.fair.charge(d.entry.lane, d.entry.fairKey, d.entry.weight);
    if (d.pin) this.pinned.set(d.entry.runId, d.waiter.runnerId);
    const scoped = d.entry.runScope || planned.pins.has(d.entry.runId);
    if (scoped) this.offered.set(d.entry.runId, (this.offered.get(d.entry.runId) ?? 0) + 1);
    for (const name of d.entry.pools) this.held.set(name, (this.held.get(name) ?? 0) + 1);
    return scoped;
  }
}
