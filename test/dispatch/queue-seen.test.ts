import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { handBack, releaseLeases } from '../../src/dispatch/lifecycle.js';
import { QueueSeen } from '../../src/dispatch/queue-seen.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { testDispatchDeps } from '../support/lifecycle.js';
import { useTestDatabase } from '../support/db.js';
import { seedRun } from '../support/seed.js';
import { recordStatements, statementsOf } from '../support/statements.js';

describe('QueueSeen', () => {
  it('holds "empty" only for the queue it was seen for, until a change or validMs', () => {
    let now = 1_000;
    const seen = new QueueSeen(() => now, 250);
    expect(seen.knownEmpty('a')).toBe(false);
    seen.sawEmpty(seen.mark(), 'a');
    expect(seen.knownEmpty('a')).toBe(true);
    expect(seen.knownEmpty('b')).toBe(false);
    now += 249;
    expect(seen.knownEmpty('a')).toBe(true);
    now += 1;
    expect(seen.knownEmpty('a')).toBe(false);

    seen.sawEmpty(seen.mark(), 'a');
    seen.changed();
    expect(seen.knownEmpty('a')).toBe(false);
  });

  it('a change that arrives while the claim runs voids what that claim saw', () => {
    const seen = new QueueSeen(() => 0, 250);
    const mark = seen.mark();
    seen.changed();
    seen.sawEmpty(mark, 'a');
    expect(seen.knownEmpty('a')).toBe(false);
  });
});

describe('a dispatch pass', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let other: Pool;
  let rec: { statements: string[]; recording: boolean };
  let runner: RunnerRow;
  let deps: Dispatcher;
  let seen: QueueSeen;
  let now: number;
  let changes: number;

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 4 });
    rec = recordStatements(pool);
    other = createPool(db.current.url, { max: 2 });
    await other.query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash) VALUES ('rnr_q', 'rnr_q', 8, 8, 'hash-rnr_q')`);
    runner = mapRunner((await other.query(`SELECT * FROM runners WHERE id = 'rnr_q'`)).rows[0]);
  });
  afterAll(async () => {
    await pool.end();
    await other.end();
  });
  beforeEach(async () => {
    await other.query(`TRUNCATE runs, steps, step_logs, queue_ready, step_leases, completed_attempts, run_pins, pool_holds`);
    now = 0;
    changes = 0;
    deps = testDispatchDeps(pool, { replicaId: 'replica-seen', now: () => now });
    seen = deps.seen;
    // Counts what the lease lifecycle tells the dispatcher, then lets it through.
    const queueChanged = deps.queueChanged;
    deps.queueChanged = () => {
      changes++;
      queueChanged();
    };
  });

  const park = (slots: number) => deps.registry.park({ runner, requestId: `q-${Math.random()}`, slots, onlyRunId: null, parkedAt: Date.now() }, 30_000);
  /** Statements sent by fn. */
  const sent = async <T>(fn: () => Promise<T>): Promise<{ value: T; statements: number }> => {
    const { value, statements } = await statementsOf(rec, fn);
    return { value, statements: statements.length };
  };

  it('once a tick took every due entry, a parked call wakes no statement until the queue changes', async () => {
    await seedRun(other, { steps: [{ name: 'a' }, { name: 'b' }] });
    const first = park(4);
    const tick = await deps.pass();
    expect(tick).toMatchObject({ claimed: 2, delivered: 2, tookAll: true });
    expect((await first.offers).map((o) => o.step)).toEqual(['a', 'b']);

    // The runner parks again: nothing is due, and nothing said otherwise.
    const idle = park(4);
    const skipped = await sent(() => deps.pass());
    expect(skipped.value).toBeNull();
    expect(skipped.statements).toBe(0);

    // Work enqueued (the NOTIFY's handler calls changed()): the next pass claims and delivers it.
    const run = await seedRun(other, { steps: [{ name: 'c' }] });
    seen.changed();
    expect(await deps.pass()).toMatchObject({ claimed: 1, delivered: 1 });
    expect((await idle.offers).map((o) => [o.run_id, o.step])).toEqual([[run.runId, 'c']]);
  });

  it('a call that waits one tick (it carried completions) is answered at once while the queue is known empty', async () => {
    park(1);
    expect(await deps.pass()).toMatchObject({ claimed: 0, tookAll: true });
    const waiting = park(2);
    const once = deps.registry.park({ runner, requestId: 'one-tick', slots: 2, onlyRunId: null, oneTick: true, parkedAt: Date.now() }, 30_000);
    const skipped = await sent(() => deps.pass());
    expect(skipped).toEqual({ value: null, statements: 0 });
    expect(await once.offers).toEqual([]);
    // The call that waits its whole window stays parked.
    expect(once.acquire.settled).toBe(true);
    expect(waiting.acquire.settled).toBe(false);
  });

  it('what nothing announced is claimed once the sighting is older than validMs', async () => {
    const idle = park(1);
    expect(await deps.pass()).toMatchObject({ claimed: 0, tookAll: true });
    // Queued with no notification (as a retry whose backoff ran out becomes due).
    await seedRun(other, { steps: [{ name: 'quiet' }] });
    now += 100;
    expect(await deps.pass()).toBeNull();
    now += 150;
    expect(await deps.pass()).toMatchObject({ claimed: 1, delivered: 1 });
    expect((await idle.offers).map((o) => o.step)).toEqual(['quiet']);
  });

  it('another set of owned shards is another queue', async () => {
    let shards = [0, 1, 2];
    deps.ownedShards = () => shards;
    park(1);
    expect(await deps.pass()).toMatchObject({ tookAll: true });
    expect(await deps.pass()).toBeNull();
    shards = Array.from({ length: 64 }, (_, i) => i);
    expect(await deps.pass()).not.toBeNull();
  });

  it('a tick that left an entry in place, or filled every slot, did not see the queue empty', async () => {
    // A step no parked call can take (the call asks for another run only) stays queued.
    await seedRun(other, { steps: [{ name: 'elsewhere' }] });
    deps.registry.park({ runner, requestId: 'only-other-run', slots: 1, onlyRunId: 999_999, parkedAt: Date.now() }, 30_000);
    expect(await deps.pass()).toMatchObject({ claimed: 1, delivered: 0, returned: 1, tookAll: false });
    // (The next pass skips its tick all the same, for another reason: nothing since could place
    // that entry, test/dispatch/unplaceable-seen.test.ts.)
    expect(deps.queueSighting()).not.toBe('empty');
    await other.query(`DELETE FROM queue_ready`);
    deps.registry.drainAll();

    // As many due entries as slots: there may be more behind them.
    await seedRun(other, { steps: [{ name: 'x' }, { name: 'y' }] });
    park(2);
    expect(await deps.pass()).toMatchObject({ claimed: 2, delivered: 2, tookAll: false });
    park(2);
    expect(await deps.pass()).toMatchObject({ claimed: 0, tookAll: true });
  });

  it('entries put back here (released, handed back) void the sighting', async () => {
    await seedRun(other, { steps: [{ name: 'r' }, { name: 'h' }] });
    const call = park(4);
    expect(await deps.pass()).toMatchObject({ delivered: 2, tookAll: true });
    const [r, h] = await call.offers;
    expect(seen.knownEmpty(JSON.stringify([deps.ownedShards(), null]))).toBe(true);

    await releaseLeases(deps, runner.id, [{ stepId: r.step_id, token: r.token }]);
    expect(changes).toBe(1);
    const again = park(4);
    expect(await deps.pass()).toMatchObject({ claimed: 1, delivered: 1 });
    expect((await again.offers).map((o) => o.step)).toEqual(['r']);

    await handBack(deps, [{ stepId: h.step_id, token: h.token }], 'test');
    expect(changes).toBe(2);
    const last = park(4);
    expect(await deps.pass()).toMatchObject({ claimed: 1, delivered: 1 });
    expect((await last.offers).map((o) => o.step)).toEqual(['h']);
  });
});
