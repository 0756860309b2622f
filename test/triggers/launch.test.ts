import { beforeEach, describe, expect, it } from 'vitest';
import { adminQueueText } from '../../src/cli/admin-queue-text.js';
import { adminQueue } from '../../src/ops/domain/console.js';
import { createLogger } from '../../src/logger.js';
import { runCancel } from '../../src/orchestrator/cancel.js';
import { withTransaction, type Pool } from '../../src/store/pool.js';
import { postureSet } from '../../src/store/posture.js';
import { LAUNCH_PROBE_SQL } from '../../src/store/triggers.js';
import { DEFAULT_LAUNCH_TIMING, DeferredLaunches, launchOnce, type LaunchDeps, type LaunchReport } from '../../src/triggers/launch.js';
import { housekeepingOnce } from '../../src/triggers/feature.js';
import { oneShotAdd, scheduleAdd, templatePut, triggerEnable, triggerShow, webhookAdd } from '../../src/ops/domain/trigger-definitions.js';
import { useTestDatabase } from '../support/db.js';

const log = createLogger('silent', { pretty: false });
const TEMPLATE = (name: string) => `name: ${name}\nsteps:\n  hello:\n    run: echo hello\n`;

function deps(pool: Pool, over: Partial<LaunchDeps> = {}): LaunchDeps {
  return { pool, log, deferred: new DeferredLaunches(), timing: DEFAULT_LAUNCH_TIMING, isLeader: () => true, ...over };
}

/** Passes at one fixed time until the loop would sleep: what a woken loop does before it idles. */
async function drain(d: LaunchDeps, now: Date, passes: LaunchReport[] = []): Promise<LaunchReport[]> {
  for (let i = 0; i < 100; i++) {
    const r = await launchOnce(d, now);
    passes.push(r);
    if (r.sleepMs > 0) return passes;
  }
  throw new Error('the loop never settled');
}

const at = (base: Date, ms: number) => new Date(base.getTime() + ms);

describe('the launch loop, pass by pass', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let base: Date;
  beforeEach(async () => {
    pool = db.current.pool;
    await pool.query(`TRUNCATE run_templates, schedules, one_shots, webhooks, webhook_deliveries, trigger_ticks, runs CASCADE`);
    await pool.query(`DELETE FROM fleet_posture`);
    // Whole seconds, so cron ticks computed from it are exact.
    base = new Date(Math.ceil(((await pool.query(`SELECT now() AS n`)).rows[0].n as Date).getTime() / 1000) * 1000);
  });

  it('probes each source with one lookup on its partial index', async () => {
    // A few rows in each table, so the statistics are not of empty tables.
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    await oneShotAdd(pool, { template: 't', at: '+1h', actor: 'test' });
    await scheduleAdd(pool, { template: 't', cron: '0 2 * * *', actor: 'test' });
    await pool.query('ANALYZE');
    const plan = await withTransaction(pool, async (c) => {
      // On a near-empty table a sequential scan is cheaper; forbid it to see what the indexes can serve.
      await c.query('SET LOCAL enable_seqscan = off');
      const { rows } = await c.query(`EXPLAIN ${LAUNCH_PROBE_SQL}`, [null, [1, 2], [3]]);
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    });
    for (const index of ['one_shots_due_idx', 'schedules_due_idx', 'webhook_deliveries_due_idx', 'trigger_ticks_pending_idx', 'trigger_ticks_missed_idx']) {
      expect(plan).toContain(index);
    }
    expect(plan).not.toMatch(/Seq Scan/);
  });

  it('sleeps until a known due time, then fires it on the dot', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    const d = deps(pool);
    const idle = await launchOnce(d, base);
    expect(idle.sleepMs).toBe(2_000);
    expect(idle.nextDueAt).toBeNull();

    const fireAt = at(base, 1_234);
    const shot = await oneShotAdd(pool, { template: 't', at: fireAt.toISOString(), actor: 'test' });
    const before = await launchOnce(d, base);
    expect(before.fired).toEqual([]);
    expect(before.sleepMs).toBe(1_234);
    expect(before.nextDueAt?.getTime()).toBe(fireAt.getTime());
    // One millisecond early: still not due, and the loop would sleep exactly that millisecond.
    expect((await launchOnce(d, at(fireAt, -1))).sleepMs).toBe(1);
    const due = await launchOnce(d, fireAt);
    expect(due.fired.map((f) => f.triggerId)).toEqual([shot.id]);
    const run = (await pool.query(`SELECT template_name, template_version, trigger_id, created_by FROM runs WHERE id = $1`, [due.fired[0].runId])).rows[0];
    expect(run).toEqual({ template_name: 't', template_version: 1, trigger_id: shot.id, created_by: `trigger:${shot.id}` });
    const shown = await triggerShow(pool, { id: shot.id });
    expect(shown.status).toBe('fired');
    expect(shown.ticks).toMatchObject([{ outcome: 'fired', runId: due.fired[0].runId, dueAt: fireAt.toISOString(), firedAt: fireAt.toISOString() }]);
    expect((await launchOnce(d, fireAt)).sleepMs).toBe(2_000);
  });

  it('fires 100 due one-shots exactly once, in passes of at most 32, with two loops racing', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    const values = Array.from({ length: 100 }, (_, i) => `(nextval('trigger_id_seq'), 't', $1::timestamptz - ${i} * interval '1 millisecond')`);
    await pool.query(`INSERT INTO one_shots (id, template, fire_at) VALUES ${values.join(', ')}`, [base]);
    const a = deps(pool);
    const b = deps(pool);
    const [pa, pb] = await Promise.all([drain(a, base), drain(b, base)]);
    const passes = [...pa, ...pb];
    for (const p of passes) {
      expect(p.claimed.oneShots).toBeLessThanOrEqual(32);
      expect(p.claimed.launches).toBeLessThanOrEqual(32);
    }
    // A pass that hit the cap asked for another at once.
    expect(passes.some((p) => p.capped && p.sleepMs === 0)).toBe(true);
    expect(passes.reduce((n, p) => n + p.claimed.oneShots, 0)).toBe(100);
    const fired = passes.flatMap((p) => p.fired);
    expect(fired).toHaveLength(100);
    const { rows } = await pool.query(`SELECT trigger_id, count(*)::int AS n FROM runs GROUP BY trigger_id`);
    expect(rows).toHaveLength(100);
    expect(rows.every((r) => r.n === 1)).toBe(true);
    const ticks = await pool.query(`SELECT outcome, count(*)::int AS n FROM trigger_ticks GROUP BY outcome`);
    expect(ticks.rows).toEqual([{ outcome: 'fired', n: 100 }]);
  });

  it('defers launches past max_concurrent_runs and re-drives them, oldest first, when a run finishes', async () => {
    await templatePut(pool, { text: TEMPLATE('capped'), maxConcurrentRuns: 1, actor: 'test' });
    const first = await oneShotAdd(pool, { template: 'capped', at: at(base, -2).toISOString(), actor: 'test' });
    const second = await oneShotAdd(pool, { template: 'capped', at: at(base, -1).toISOString(), actor: 'test' });
    const third = await oneShotAdd(pool, { template: 'capped', at: base.toISOString(), actor: 'test' });
    const d = deps(pool);
    const passes = await drain(d, base);
    const fired = passes.flatMap((p) => p.fired);
    expect(fired.map((f) => f.triggerId)).toEqual([first.id]);
    expect(passes.flatMap((p) => p.deferred).map((x) => x.reason)).toEqual(['max_concurrent_runs 1 reached (1 running)', 'max_concurrent_runs 1 reached (1 running)']);
    // Held: left out of the probe until one discovery interval out.
    const idle = passes.at(-1)!;
    expect(idle.nextDueAt).toBeNull();
    expect(idle.sleepMs).toBe(2_000);
    expect(d.deferred.earliestRetry()).toBe(base.getTime() + DEFAULT_LAUNCH_TIMING.discoveryIntervalMs);
    expect((await triggerShow(pool, { id: second.id })).ticks[0]).toMatchObject({ outcome: 'pending', deferredReason: 'max_concurrent_runs 1 reached (1 running)', deferredAt: base.toISOString() });

    // The run finishes: its template's held launches go at once (the feature calls releaseTemplate on the NOTIFY).
    await runCancel(pool, fired[0].runId, { actor: 'test' });
    expect(d.deferred.releaseTemplate('capped')).toBe(2);
    const later = at(base, 1_000);
    const after = (await drain(d, later)).flatMap((p) => p.fired);
    expect(after.map((f) => f.triggerId)).toEqual([second.id]);
    const shown = await triggerShow(pool, { id: second.id });
    expect(shown.ticks[0]).toMatchObject({ outcome: 'fired', runId: after[0].runId, deferredAt: base.toISOString(), firedAt: later.toISOString() });
    expect((await triggerShow(pool, { id: third.id })).ticks[0].outcome).toBe('pending');

    // Without a finish, the held launch is retried one discovery interval later (and still waits).
    expect(d.deferred.earliestRetry()).toBe(later.getTime() + DEFAULT_LAUNCH_TIMING.discoveryIntervalMs);
    expect((await launchOnce(d, at(later, 60_000))).claimed.launches).toBe(0);
    const retry = at(later, DEFAULT_LAUNCH_TIMING.discoveryIntervalMs);
    const retried = await drain(d, retry);
    expect(retried.flatMap((p) => p.deferred).map((x) => x.tickId)).toHaveLength(1);
    expect(retried.flatMap((p) => p.fired)).toEqual([]);
  });

  it('admin queue shows the next due trigger and the launches waiting', async () => {
    await templatePut(pool, { text: TEMPLATE('capped'), maxConcurrentRuns: 1, actor: 'test' });
    await oneShotAdd(pool, { template: 'capped', at: base.toISOString(), actor: 'test' });
    const waiting = await oneShotAdd(pool, { template: 'capped', at: base.toISOString(), actor: 'test' });
    const sched = await scheduleAdd(pool, { template: 'capped', cron: '0 2 * * *', tz: 'Europe/Berlin', actor: 'test' });
    await drain(deps(pool), base);
    const view = await adminQueue({ pool, actor: 'test', source: 'test' }, { limit: 10, acceptExceeding: true });
    expect(view.triggers!.next).toMatchObject([{ id: sched.id, kind: 'schedule', template: 'capped', dueAt: sched.nextDueAt }]);
    expect(view.triggers!.waiting.total).toBe(1);
    expect(view.triggers!.waiting.items).toMatchObject([{ triggerId: waiting.id, kind: 'once', reason: 'max_concurrent_runs 1 reached (1 running)' }]);
    const text = adminQueueText(view);
    expect(text).toContain(`next trigger: schedule ${sched.id} (capped) in `);
    expect(text).toContain(`1 launch waiting; oldest: once ${waiting.id} (capped) `);
    expect(text).toContain(': max_concurrent_runs 1 reached (1 running)');
  });

  it('defers past the daily ceiling', async () => {
    await templatePut(pool, { text: TEMPLATE('daily'), dailyCeiling: 1, actor: 'test' });
    await oneShotAdd(pool, { template: 'daily', at: base.toISOString(), actor: 'test' });
    await oneShotAdd(pool, { template: 'daily', at: base.toISOString(), actor: 'test' });
    const passes = await drain(deps(pool), base);
    expect(passes.flatMap((p) => p.fired)).toHaveLength(1);
    expect(passes.flatMap((p) => p.deferred).map((x) => x.reason)).toEqual(['daily_ceiling 1 reached (1 runs today, UTC)']);
  });

  it('a leader killed mid-pass: the next leader fires what was due, nothing twice', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    const values = Array.from({ length: 40 }, () => `(nextval('trigger_id_seq'), 't', $1::timestamptz)`);
    await pool.query(`INSERT INTO one_shots (id, template, fire_at) VALUES ${values.join(', ')}`, [base]);
    // The first leader's store connection dies after a handful of operations, in the middle of its launches.
    let ops = 0;
    const dying = {
      query: (...args: unknown[]) => (++ops > 12 ? Promise.reject(new Error('Connection terminated unexpectedly')) : (pool.query as (...a: unknown[]) => Promise<unknown>)(...args)),
      connect: () => (++ops > 12 ? Promise.reject(new Error('Connection terminated unexpectedly')) : pool.connect()),
    } as unknown as Pool;
    await expect(drain(deps(dying), base)).rejects.toThrow(/Connection terminated/);
    const partial = (await pool.query(`SELECT count(*)::int AS n FROM runs`)).rows[0].n;
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThan(40);

    const passes = await drain(deps(pool), at(base, 5_000));
    expect(passes.flatMap((p) => p.fired).length).toBe(40 - partial);
    const { rows } = await pool.query(`SELECT o.id, (SELECT count(*)::int FROM runs r WHERE r.trigger_id = o.id) AS runs FROM one_shots o`);
    expect(rows).toHaveLength(40);
    expect(rows.every((r) => r.runs === 1)).toBe(true);
  });

  it('fires nothing for a replica that does not lead', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    await oneShotAdd(pool, { template: 't', at: base.toISOString(), actor: 'test' });
    const r = await launchOnce(deps(pool, { isLeader: () => false }), base);
    expect(r.leader).toBe(false);
    expect((await pool.query(`SELECT count(*)::int AS n FROM trigger_ticks`)).rows[0].n).toBe(0);
  });

  it('halt: nothing fires, due ticks are recorded missed; on resume catch-up none, last and all', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    const none = await scheduleAdd(pool, { template: 't', cron: '* * * * *', catchUp: 'none', actor: 'test' });
    const last = await scheduleAdd(pool, { template: 't', cron: '* * * * *', catchUp: 'last', actor: 'test' });
    const all = await scheduleAdd(pool, { template: 't', cron: '* * * * *', catchUp: 'all', overlap: 'allow', actor: 'test' });
    const once = await oneShotAdd(pool, { template: 't', at: base.toISOString(), actor: 'test' });
    const first = new Date(none.nextDueAt!);
    await withTransaction(pool, (c) => postureSet(c, { field: 'halted', value: true, reason: 'test', actor: 'test' }));

    const d = deps(pool);
    const halted = at(first, 2 * 60_000 + 500);
    const during = await drain(d, halted);
    expect(during[0].halted).toBe(true);
    expect(during.flatMap((p) => p.fired)).toEqual([]);
    expect(during.reduce((n, p) => n + p.missed, 0)).toBe(9);
    expect(during.at(-1)!.nextDueAt?.getTime()).toBe(at(first, 3 * 60_000).getTime());
    expect((await triggerShow(pool, { id: once.id })).status).toBe('pending');
    expect((await pool.query(`SELECT count(*)::int AS n FROM runs`)).rows[0].n).toBe(0);

    await withTransaction(pool, (c) => postureSet(c, { field: 'halted', value: false, reason: 'test', actor: 'test' }));
    const resumed = at(halted, 1_000);
    const after = await drain(d, resumed);
    const firedBy = (id: number) => after.flatMap((p) => p.fired).filter((f) => f.triggerId === id).length;
    expect(firedBy(none.id)).toBe(0);
    expect(firedBy(last.id)).toBe(1);
    expect(firedBy(all.id)).toBe(3);
    expect(firedBy(once.id)).toBe(1);

    const ticks = async (id: number) => (await triggerShow(pool, { id })).ticks.reverse().map((t) => [t.outcome, t.missed, t.catchUp]);
    expect(await ticks(none.id)).toEqual([
      ['missed', true, 'none: not fired'],
      ['missed', true, 'none: not fired'],
      ['missed', true, 'none: not fired'],
    ]);
    expect(await ticks(last.id)).toEqual([
      ['missed', true, 'last: a later tick fired instead'],
      ['missed', true, 'last: a later tick fired instead'],
      ['fired', true, 'last: fired on resume'],
    ]);
    expect(await ticks(all.id)).toEqual([
      ['fired', true, 'all: fired on resume'],
      ['fired', true, 'all: fired on resume'],
      ['fired', true, 'all: fired on resume'],
    ]);
  });

  it('overlap: skip records the tick as skipped, queue waits for the running one', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    const skip = await scheduleAdd(pool, { template: 't', cron: '* * * * *', overlap: 'skip', actor: 'test' });
    const queue = await scheduleAdd(pool, { template: 't', cron: '* * * * *', overlap: 'queue', actor: 'test' });
    const first = new Date(skip.nextDueAt!);
    const d = deps(pool);
    const one = (await drain(d, first)).flatMap((p) => p.fired);
    expect(one.map((f) => f.triggerId).sort()).toEqual([skip.id, queue.id].sort());
    const second = await drain(d, at(first, 60_000));
    expect(second.flatMap((p) => p.fired)).toEqual([]);
    expect(second.flatMap((p) => p.skipped)).toHaveLength(1);
    expect(second.flatMap((p) => p.deferred).map((x) => x.reason)).toEqual([`overlap queue: run ${one.find((f) => f.triggerId === queue.id)!.runId} of this trigger is still running`]);
    expect((await triggerShow(pool, { id: skip.id })).ticks[0]).toMatchObject({ outcome: 'skipped_overlap' });

    await runCancel(pool, one.find((f) => f.triggerId === queue.id)!.runId, { actor: 'test' });
    d.deferred.releaseTemplate('t');
    const third = await drain(d, at(first, 61_000));
    expect(third.flatMap((p) => p.fired).map((f) => f.triggerId)).toEqual([queue.id]);
  });

  it('a schedule tick already in the ledger is recorded as deduplicated and not fired again', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    const s = await scheduleAdd(pool, { template: 't', cron: '* * * * *', overlap: 'allow', actor: 'test' });
    const first = new Date(s.nextDueAt!);
    const d = deps(pool);
    expect((await drain(d, first)).flatMap((p) => p.fired)).toHaveLength(1);
    // The schedule's row is put back to the tick it already fired (a restore from backup, a hand edit).
    await pool.query(`UPDATE schedules SET next_due_at = $2 WHERE id = $1`, [s.id, first]);
    const again = await drain(d, at(first, 1_000));
    expect(again.flatMap((p) => p.fired)).toEqual([]);
    const ticks = (await triggerShow(pool, { id: s.id })).ticks.reverse();
    expect(ticks.map((t) => [t.outcome, t.dueAt])).toEqual([
      ['fired', first.toISOString()],
      ['deduplicated', first.toISOString()],
    ]);
    expect(ticks[1].detail).toBe('this tick was already recorded');
    expect((await pool.query(`SELECT count(*)::int AS n FROM runs`)).rows[0].n).toBe(1);
  });

  it('housekeeping settles the pending deliveries of a disabled webhook and prunes history past the retention', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    const hook = await webhookAdd(pool, { template: 't', actor: 'test' });
    await pool.query(`INSERT INTO webhook_deliveries (webhook_id, delivery_key, signature, payload) VALUES ($1, 'a', 's1', '{}'), ($1, 'b', 's2', '{}')`, [hook.id]);
    // Disabled behind the verb's back (the verb settles at once): the loop deferred them, housekeeping settles them.
    await pool.query(`UPDATE webhooks SET enabled = false WHERE id = $1`, [hook.id]);
    const d = deps(pool);
    const pass = await drain(d, at(base, 60_000));
    expect(pass.flatMap((p) => p.fired)).toEqual([]);
    expect(d.deferred.deliveries.size).toBe(2);
    expect(pass.at(-1)!.sleepMs).toBe(2_000);
    await oneShotAdd(pool, { template: 't', at: base.toISOString(), actor: 'test' });
    await drain(d, base);
    const housekeeping = { pool, log, retentionMs: 30 * 86_400_000 };
    expect(await housekeepingOnce(housekeeping)).toEqual({ settled: 2, deliveriesPruned: 0, ticksPruned: 0 });
    const { rows } = await pool.query(`SELECT status, detail FROM webhook_deliveries WHERE webhook_id = $1`, [hook.id]);
    expect(rows).toEqual([
      { status: 'settled', detail: 'webhook disabled before the delivery fired' },
      { status: 'settled', detail: 'webhook disabled before the delivery fired' },
    ]);
    // Enabling it again does not revive settled deliveries.
    await triggerEnable(pool, { id: hook.id, enabled: true, actor: 'test' });
    expect((await drain(deps(pool), at(base, 120_000))).flatMap((p) => p.fired)).toEqual([]);
    // Forty days on, past the retention, the decided history goes: the tick and the settled deliveries.
    const { rows: clock } = await pool.query(`SELECT now() + interval '40 days' AS later`);
    expect(await housekeepingOnce(housekeeping, { now: clock[0].later })).toEqual({ settled: 0, deliveriesPruned: 2, ticksPruned: 1 });
  });

  it('a schedule behind by several ticks fires the latest and records the rest by its catch-up policy', async () => {
    await templatePut(pool, { text: TEMPLATE('t'), actor: 'test' });
    const s = await scheduleAdd(pool, { template: 't', cron: '* * * * *', actor: 'test' });
    const first = new Date(s.nextDueAt!);
    const passes = await drain(deps(pool), at(first, 3 * 60_000 + 10));
    expect(passes.flatMap((p) => p.fired)).toHaveLength(1);
    const ticks = (await triggerShow(pool, { id: s.id })).ticks.reverse();
    expect(ticks.map((t) => t.outcome)).toEqual(['missed', 'missed', 'missed', 'fired']);
    expect(ticks.map((t) => t.dueAt)).toEqual([0, 1, 2, 3].map((m) => at(first, m * 60_000).toISOString()));
    expect(ticks[0].detail).toBe('came due while no leader was firing');
  });
});
