import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Waiter } from '../../src/core/entry.js';
import { FairShare } from '../../src/core/stride.js';
import { TickLedger } from '../../src/dispatch/tick-ledger.js';
import { pinsCreate } from '../../src/store/leases.js';
import { createPool, withClient, withTransaction, type Pool } from '../../src/store/pool.js';
import { poolLimitSet } from '../../src/store/pools.js';
import { queueClaim } from '../../src/store/queue.js';
import { useTestDatabase } from '../support/db.js';
import { deliver } from '../support/lifecycle.js';
import { seedRun } from '../support/seed.js';
import { recordStatements, statementsOf } from '../support/statements.js';

const ALL_SHARDS = Array.from({ length: 64 }, (_, i) => i);
const waiter = (runnerId: string): Waiter => ({
  runnerId,
  runnerName: runnerId,
  group: null,
  labels: [],
  executors: ['shell'],
  groupAttributes: {},
  exclusive: false,
  maxLoad: 8,
  runningLoad: 0,
  slots: 4,
  onlyRunId: null,
  drained: false,
});

describe('a tick ledger: what the store showed, and what the tick planned on top', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let rec: { statements: string[]; recording: boolean };

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 2 });
    rec = recordStatements(pool);
  });
  afterAll(async () => pool.end());

  it('reads each run and pool once, and plans the next page against the store plus the tick', async () => {
    const other = db.current.pool;
    await poolLimitSet(other, { name: 'db', limit: 3 });
    // A run-scoped run pinned to rnr_1 with one step out (holding the pool), and one not yet pinned.
    const pinned = await seedRun(other, { scope: 'run', maxParallelSteps: 3, steps: [{ name: 'a', pools: ['db'] }, { name: 'b', pools: ['db'] }, { name: 'c' }] });
    await deliver(other, { run: pinned.runId, step: 'a', runnerId: 'rnr_1', pools: ['db'] });
    await withTransaction(other, (client) => pinsCreate(client, [{ runId: pinned.runId, runnerId: 'rnr_1' }]));
    const fresh = await seedRun(other, { scope: 'run', steps: [{ name: 'x' }] });
    const stepScoped = await seedRun(other, { steps: [{ name: 's' }] });

    const claims = await withClient(pool, (client) => queueClaim(client, { shards: ALL_SHARDS, limit: 10, lock: false }));
    const entry = (run: number, step: number) => claims.find((c) => c.runId === run && c.stepId === step)!;
    expect(claims).toHaveLength(4);

    const fair = new FairShare();
    const ledger = new TickLedger(fair);
    const first = await statementsOf(rec, () => withClient(pool, (client) => ledger.read(client, claims)));
    // One read of the pins, one of the steps out, one of the pools: the step-scoped run is read for neither.
    expect(first.statements).toHaveLength(3);
    expect(ledger.planInput()).toEqual({
      pins: new Map([[pinned.runId, 'rnr_1']]),
      outstandingByRun: new Map([[pinned.runId, 1]]),
      pools: new Map([['db', { limit: 3, held: 1 }]]),
    });
    const again = await statementsOf(rec, () => withClient(pool, (client) => ledger.read(client, claims)));
    expect(again.statements).toEqual([]);

    // The tick plans b (pinned run, pooled) and x (pins its run to rnr_2): the next page sees both.
    const view = ledger.planInput();
    const b = entry(pinned.runId, pinned.stepIds[1]);
    const x = entry(fresh.runId, fresh.stepIds[0]);
    expect(ledger.record({ entry: b, waiter: waiter('rnr_1'), pin: false, exceedsMaxLoad: false }, view)).toBe(true);
    expect(ledger.record({ entry: x, waiter: waiter('rnr_2'), pin: true, exceedsMaxLoad: false }, view)).toBe(true);
    const s = entry(stepScoped.runId, stepScoped.stepIds[0]);
    expect(ledger.record({ entry: s, waiter: waiter('rnr_3'), pin: false, exceedsMaxLoad: false }, view)).toBe(false);
    expect(ledger.planInput()).toEqual({
      pins: new Map([[pinned.runId, 'rnr_1'], [fresh.runId, 'rnr_2']]),
      outstandingByRun: new Map([[pinned.runId, 2], [fresh.runId, 1]]),
      pools: new Map([['db', { limit: 3, held: 2 }]]),
    });
    expect(ledger.pinned).toEqual(new Map([[fresh.runId, 'rnr_2']]));
    expect(ledger.deliveries.map((d) => d.entry.stepId)).toEqual([b.stepId, x.stepId, s.stepId]);
    // The tick's fair share is charged as it plans; the dispatcher's own only at commit.
    expect(ledger.fair.passOf(s.lane, s.fairKey)).toBeGreaterThan(0);
    expect(fair.passOf(s.lane, s.fairKey)).toBe(0);
    // Nothing planned is written: the store still shows what it showed.
    const fresh2 = new TickLedger(fair);
    await withClient(pool, (client) => fresh2.read(client, claims));
    expect(fresh2.planInput()).toEqual(view);
  });
});
