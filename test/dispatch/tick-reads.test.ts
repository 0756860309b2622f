import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import type { Offer } from '../../src/dispatch/offers.js';
import { postureLever } from '../../src/ops/domain/postures.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { testDispatchDeps } from '../support/lifecycle.js';
import { useTestDatabase } from '../support/db.js';
import { seedRun } from '../support/seed.js';
import { recordStatements, statementsOf } from '../support/statements.js';

/** What each statement of a tick is, by the table it reads or writes. */
function kind(sql: string): string {
  if (/^\s*(BEGIN|COMMIT|ROLLBACK)\b/i.test(sql)) return sql.trim().split(/\s/)[0].toUpperCase();
  if (/fleet_posture/.test(sql) && /FROM runners r/.test(sql)) return 'posture+parked runners';
  if (/fleet_posture/.test(sql)) return 'posture';
  if (/^\s*SELECT \* FROM queue_ready/.test(sql)) return /SKIP LOCKED/.test(sql) ? 'locked claim' : 'claim';
  if (/INSERT INTO run_pins/.test(sql)) return 'pin write';
  if (/run_pins/.test(sql)) return 'pins';
  if (/run_scope AND runner_id/.test(sql)) return 'scoped runs';
  if (/FROM step_leases WHERE run_id/.test(sql)) return 'outstanding';
  if (/INSERT INTO step_leases/.test(sql)) return 'deliver';
  if (/UPDATE steps/.test(sql)) return 'steps started';
  if (/pool_limits|pool_holds/.test(sql)) return 'pools';
  if (/UPDATE queue_ready q SET blocked_on/.test(sql)) return 'set aside';
  if (/FROM runners r/.test(sql)) return 'runners';
  return sql.replace(/\s+/g, ' ').slice(0, 40);
}

/**
 * A tick's statements with its first two as a set: the posture read goes out on its own
 * connection beside the first claim, so its place beside it varies.
 */
const overlapped = (kinds: string[]): Array<string | string[]> => [[...kinds.slice(0, 2)].sort(), ...kinds.slice(2)];
const START = ['claim', 'posture+parked runners'];

describe('what a dispatch tick reads', () => {
  const db = useTestDatabase();
  let pool: Pool;
  /** Another replica's pool: levers pulled there are seen here only through the store. */
  let other: Pool;
  let rec: { statements: string[]; recording: boolean };
  let runners: RunnerRow[];
  let deps: Dispatcher;

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 4 });
    rec = recordStatements(pool);
    other = createPool(db.current.url, { max: 2 });
    for (const id of ['rnr_a', 'rnr_b']) {
      await other.query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash) VALUES ($1, $1, 8, 8, $2)`, [id, `hash-${id}`]);
    }
    runners = (await other.query(`SELECT * FROM runners ORDER BY id`)).rows.map(mapRunner);
  });
  afterAll(async () => {
    await pool.end();
    await other.end();
  });
  beforeEach(async () => {
    await other.query(`TRUNCATE runs, steps, step_logs, queue_ready, step_leases, completed_attempts, run_pins, pool_holds, pool_limits`);
    await postureLever(other, { fields: ['halted', 'quiesced', 'system_quiesced'], value: false, actor: 'test' });
    deps = testDispatchDeps(pool, { replicaId: 'replica-reads', acceptExceeding: true });
  });

  const park = (runner: RunnerRow, slots: number) => deps.registry.park({ runner, requestId: `${runner.id}-${slots}-${Math.random()}`, slots, onlyRunId: null, parkedAt: Date.now() }, 30_000);
  const recorded = async <T>(fn: () => Promise<T>): Promise<{ value: T; kinds: string[] }> => {
    const { value, statements } = await statementsOf(rec, fn);
    return { value, kinds: statements.map(kind) };
  };

  it('a busy tick with no run-scoped or pooled claim reads the posture with the parked runners, and no pins, caps or scoped runs; it claims without locks and its delivery, committing alone, starts the steps', async () => {
    await seedRun(other, { steps: ['s1', 's2', 's3', 's4', 's5'].map((name) => ({ name })) });
    const a1 = park(runners[0], 2);
    const a2 = park(runners[0], 1);
    const b = park(runners[1], 2);
    const { value: tick, kinds } = await recorded(() => deps.tick());
    expect(tick).toMatchObject({ waiters: 3, claimed: 5, delivered: 5, returned: 0, stoppedBy: null });
    expect(overlapped(kinds)).toEqual([START, 'deliver']);
    const offers = await Promise.all([a1.offers, a2.offers, b.offers]);
    expect(offers.map((o) => o.length)).toEqual([2, 1, 2]);
    // The details of each offer came back with the delivery itself.
    expect(offers.flat().map((o) => o.command)).toEqual(['true', 'true', 'true', 'true', 'true']);
    const { rows } = await other.query(`SELECT status, runner_id, count(*)::int AS n FROM steps GROUP BY status, runner_id ORDER BY runner_id`);
    expect(rows).toEqual([{ status: 'running', runner_id: 'rnr_a', n: 3 }, { status: 'running', runner_id: 'rnr_b', n: 2 }]);
  });

  it('a run-scoped claim reads its run\'s pin and outstanding steps once, and a runner holding a scoped run takes nothing else', async () => {
    const scoped = await seedRun(other, { scope: 'run', maxParallelSteps: 2, steps: ['p1', 'p2', 'p3'].map((name) => ({ name })) });
    const a = park(runners[0], 4);
    const { value: tick, kinds: all } = await recorded(() => deps.tick());
    expect(tick).toMatchObject({ claimed: 3, delivered: 2, returned: 1, blocked: 1 });
    // A scoped entry needs its lock (its pin is written in the delivery's transaction): the
    // unlocked claim that found it is followed by a locked one, and the tick delivers in that.
    expect(overlapped(all).slice(0, 3)).toEqual([START, 'BEGIN', 'locked claim']);
    const commit = all.lastIndexOf('COMMIT');
    const kinds = all.slice(0, commit + 1);
    expect(kinds.filter((k) => k === 'outstanding')).toHaveLength(1);
    // Its pin read before planning, written, and read back (another replica may have pinned it first).
    expect(kinds.filter((k) => k.startsWith('pin'))).toEqual(['pins', 'pin write', 'pins']);
    // After the commit, the step left at the run's cap is set aside on its run: the fleet, its
    // pin and out-count read once for the verdict (it names no pool), then one write.
    expect(all.slice(commit + 1)).toEqual(['runners', 'pins', 'outstanding', 'set aside']);
    const { rows: aside } = await other.query(`SELECT blocked_on FROM queue_ready`);
    expect(aside).toEqual([{ blocked_on: `run:${scoped.runId}` }]);
    expect((await a.offers).map((o) => o.run_id)).toEqual([scoped.runId, scoped.runId]);

    // rnr_a executes the scoped run: the parked read says so, and step-scoped work goes to rnr_b only.
    const loose = await seedRun(other, { steps: [{ name: 'loose' }] });
    const again = park(runners[0], 4);
    const { value: second, kinds: secondKinds } = await recorded(() => deps.tick());
    expect(second).toMatchObject({ delivered: 0 });
    expect(secondKinds).not.toContain('scoped runs');
    // The tick after one that needed locks locks from the start; its claims needed none.
    expect(overlapped(secondKinds.filter((k) => k !== 'BEGIN')).slice(0, 1)).toEqual([['locked claim', 'posture+parked runners']]);
    const b = park(runners[1], 1);
    expect((await deps.tick()).delivered).toBe(1);
    expect((await b.offers).map((o) => o.run_id)).toEqual([loose.runId]);
    deps.registry.drainAll();
    expect(await again.offers).toEqual([]);
  });

  /**
   * deps.pool, except that `before` (park a call, pull a lever) runs once the tick's first claim
   * has come back and before the tick sees its rows: what happens "while the tick plans", at a
   * fixed point of it (its posture read, sent beside that claim, is done by then).
   */
  const whenFirstClaimReturns = (before: () => Promise<void> | void): Pool => {
    let done = false;
    // The pool's own reads in flight (the posture read): the hook waits for them to be answered.
    const reads = new Set<Promise<unknown>>();
    const bound = (o: object, k: string | symbol) => {
      const v: unknown = Reflect.get(o, k);
      return typeof v === 'function' ? v.bind(o) : v;
    };
    return new Proxy(pool, {
      get(target, key) {
        if (key === 'query') {
          return (...args: unknown[]) => {
            const read = (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
            reads.add(read);
            return read.finally(() => reads.delete(read));
          };
        }
        if (key !== 'connect') return bound(target, key);
        return async () => {
          const client = await target.connect();
          return new Proxy(client, {
            get(c, k) {
              if (k !== 'query') return bound(c, k);
              return async (...args: Parameters<typeof c.query>) => {
                const value = await (c.query as (...a: unknown[]) => Promise<unknown>)(...args);
                if (!done && typeof args[0] === 'string' && kind(args[0]) === 'claim') {
                  done = true;
                  await Promise.allSettled([...reads]);
                  await before();
                }
                return value;
              };
            },
          });
        };
      },
    });
  };

  it('a call that parks while a tick plans joins that tick', async () => {
    await seedRun(other, { steps: ['j1', 'j2', 'j3'].map((name) => ({ name })) });
    const first = park(runners[0], 1);
    let late: { offers: Promise<Offer[]> } | undefined;
    deps.pool = whenFirstClaimReturns(() => {
      late = park(runners[1], 2);
    });
    const { value: tick, kinds } = await recorded(() => deps.tick());
    expect(tick).toMatchObject({ waiters: 2, claimed: 3, delivered: 3 });
    // Its runner is read with the posture inside the tick, then one more claim serves it.
    expect(overlapped(kinds)).toEqual([START, 'posture+parked runners', 'claim', 'deliver']);
    expect((await first.offers).map((o) => o.step)).toEqual(['j1']);
    expect((await late!.offers).map((o) => o.step).sort()).toEqual(['j2', 'j3']);
  });

  it('a pooled claim is made again under lock and delivered in its transaction; ticks lock until one claims nothing that needs it', async () => {
    await other.query(`INSERT INTO pool_limits (name, max_holders) VALUES ('db', 1)`);
    await seedRun(other, { steps: [{ name: 'pooled', pools: ['db'] }, { name: 'plain' }] });
    const a = park(runners[0], 2);
    const { value: tick, kinds } = await recorded(() => deps.tick());
    expect(tick).toMatchObject({ claimed: 2, delivered: 2 });
    expect(overlapped(kinds).slice(0, 3)).toEqual([START, 'BEGIN', 'locked claim']);
    expect(kinds).toContain('pools');
    expect(kinds.slice(-2)).toEqual(['deliver', 'COMMIT']);
    expect((await a.offers).map((o) => o.step).sort()).toEqual(['plain', 'pooled']);
    expect((await other.query(`SELECT pool, step_id FROM pool_holds`)).rows).toHaveLength(1);

    // The next tick locks from the start; it claims only entries that need no lock...
    await seedRun(other, { steps: [{ name: 'second' }] });
    const b = park(runners[1], 1);
    const { kinds: lockedKinds } = await recorded(() => deps.tick());
    expect(overlapped(lockedKinds.filter((k) => k !== 'BEGIN'))).toEqual([['locked claim', 'posture+parked runners'], 'deliver', 'COMMIT']);
    expect((await b.offers).map((o) => o.step)).toEqual(['second']);
    // ... so the one after goes without.
    await seedRun(other, { steps: [{ name: 'third' }] });
    const c = park(runners[1], 1);
    const { kinds: unlockedKinds } = await recorded(() => deps.tick());
    expect(overlapped(unlockedKinds)).toEqual([START, 'deliver']);
    expect((await c.offers).map((o) => o.step)).toEqual(['third']);
  });

  it('an entry taken while an unlocked tick plans is not leased twice: the call gets the next one, from a locked claim', async () => {
    const { stepIds } = await seedRun(other, { steps: ['t1', 't2', 't3'].map((name) => ({ name })) });
    const a = park(runners[0], 1);
    // Another dispatcher takes t1 between this tick's claim and its delivery.
    deps.pool = whenFirstClaimReturns(async () => {
      await other.query(`DELETE FROM queue_ready WHERE step_id = $1`, [stepIds[0]]);
    });
    const { value: tick, kinds } = await recorded(() => deps.tick());
    expect(tick).toMatchObject({ delivered: 1 });
    expect(overlapped(kinds)).toEqual([START, 'deliver', 'BEGIN', 'posture+parked runners', 'locked claim', 'deliver', 'COMMIT']);
    expect((await a.offers).map((o) => o.step)).toEqual(['t2']);
    const { rows } = await other.query(`SELECT step_id FROM step_leases ORDER BY step_id`);
    expect(rows.map((r) => Number(r.step_id))).toEqual([stepIds[1]]);
  });

  it('two dispatchers claiming the same shards without locks lease every entry once, and every call is served', async () => {
    const seeded = await Promise.all(Array.from({ length: 4 }, (_, r) => seedRun(other, { steps: Array.from({ length: 10 }, (_, i) => ({ name: `r${r}s${i}` })) })));
    const all = seeded.flatMap((s) => s.stepIds).sort((x, y) => x - y);
    const twin = testDispatchDeps(pool, { replicaId: 'replica-twin', acceptExceeding: true });
    for (const id of ['rnr_wide_a', 'rnr_wide_b']) {
      await other.query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash) VALUES ($1, $1, 64, 64, $2) ON CONFLICT DO NOTHING`, [id, `hash-${id}`]);
    }
    const wide = (await other.query(`SELECT * FROM runners WHERE id LIKE 'rnr_wide_%' ORDER BY id`)).rows.map(mapRunner);
    const got: Offer[] = [];
    for (let round = 0; round < 4; round++) {
      // Five one-slot calls on each, every runner a fresh one: 10 offers a round, 40 entries in all.
      const calls = [deps, twin].flatMap((d, k) => Array.from({ length: 5 }, (_, i) => d.registry.park({ runner: wide[(k + i) % 2], requestId: `race-${round}-${k}-${i}`, slots: 1, onlyRunId: null, parkedAt: Date.now() }, 30_000)));
      const ticks = await Promise.all([deps.tick(), twin.tick()]);
      expect(ticks[0].delivered + ticks[1].delivered).toBe(10);
      for (const c of calls) {
        const offers = await c.offers;
        expect(offers).toHaveLength(1);
        got.push(...offers);
      }
    }
    expect(got.map((o) => o.step_id).sort((x, y) => x - y)).toEqual(all);
    const { rows } = await other.query(`SELECT count(*)::int AS n, count(DISTINCT step_id)::int AS d FROM step_leases`);
    expect(rows[0]).toEqual({ n: 40, d: 40 });
    expect((await other.query(`SELECT count(*)::int AS n FROM queue_ready`)).rows[0].n).toBe(0);
  });

  it('a posture pulled on another replica holds the next tick here, and keeps out calls that join a tick after it', async () => {
    await seedRun(other, { steps: ['h1', 'h2'].map((name) => ({ name })) });
    await postureLever(other, { fields: ['quiesced'], value: true, actor: 'test' });
    const early = park(runners[0], 1);
    // The first tick's claim went out beside the posture read: it read, and left, what it found.
    const { value: tick, kinds } = await recorded(() => deps.tick());
    expect(tick).toMatchObject({ stoppedBy: 'quiesced', claimed: 0, delivered: 0 });
    expect(overlapped(kinds)).toEqual([START]);
    expect((await other.query(`SELECT count(*)::int AS n FROM queue_ready`)).rows[0].n).toBe(2);
    // Having seen offers stopped, the next tick reads the posture alone: a stopped fleet costs that.
    const { value: again, kinds: againKinds } = await recorded(() => deps.tick());
    expect(again).toMatchObject({ stoppedBy: 'quiesced', claimed: 0, delivered: 0 });
    expect(againKinds).toEqual(['posture+parked runners']);
    await postureLever(other, { fields: ['quiesced'], value: false, actor: 'test' });

    // Halted while the tick plans, straight in the store: what it planned before stands, and the
    // call that parks after the halt gets nothing from this tick.
    let late: { offers: Promise<Offer[]> } | undefined;
    deps.pool = whenFirstClaimReturns(async () => {
      await other.query(`UPDATE fleet_posture SET halted = true`);
      late = park(runners[1], 1);
    });
    try {
      expect(await deps.tick()).toMatchObject({ waiters: 2, claimed: 1, delivered: 1 });
    } finally {
      await other.query(`UPDATE fleet_posture SET halted = false`);
    }
    expect((await early.offers).map((o) => o.step)).toEqual(['h1']);
    expect(deps.registry.size).toBe(1);
    deps.registry.drainAll();
    expect(await late!.offers).toEqual([]);
  });
});
