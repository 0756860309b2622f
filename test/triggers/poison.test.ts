import { beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { Pool } from '../../src/store/pool.js';
import { deliveryInsert } from '../../src/store/triggers.js';
import { DEFAULT_LAUNCH_TIMING, DeferredLaunches, launchOnce, type LaunchDeps, type LaunchReport } from '../../src/triggers/launch.js';
import { oneShotAdd, scheduleAdd, templatePut, webhookAdd } from '../../src/ops/domain/trigger-definitions.js';
import { useTestDatabase } from '../support/db.js';

// Each source of the launch loop is fed one row that fails for its own data, written straight
// into the store past the checks that would refuse it at the edge. The rows behind it must fire,
// and the bad one must end as a failed tick that says why, never retried on every pass.

const log = createLogger('silent', { pretty: false });
const TEMPLATE = `name: t\nenv: { GIT_REF: none }\nsteps:\n  hello:\n    run: echo hello\n`;
// Ten to the fourth strings from a few lines: the YAML parser refuses to expand it.
const ALIAS_BOMB = `name: bomb
a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
steps:
  s:
    run: echo
`;

function deps(pool: Pool): LaunchDeps {
  return { pool, log, deferred: new DeferredLaunches(), timing: DEFAULT_LAUNCH_TIMING, isLeader: () => true };
}

/** Passes at one time until the loop would sleep; throws if it never does (a row retried forever). */
async function drain(d: LaunchDeps, now: Date): Promise<LaunchReport[]> {
  const passes: LaunchReport[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await launchOnce(d, now);
    passes.push(r);
    if (r.sleepMs > 0) return passes;
  }
  throw new Error('the loop never settled');
}

describe('the launch loop goes on past a row that fails for its own data', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let later: Date;
  beforeEach(async () => {
    pool = db.current.pool;
    await pool.query(`TRUNCATE run_templates, schedules, one_shots, webhooks, webhook_deliveries, trigger_ticks, runs CASCADE`);
    await pool.query(`DELETE FROM fleet_posture`);
    await templatePut(pool, { text: TEMPLATE, actor: 'test' });
    // Every row of a test is due by then; the loop is driven at that one time.
    later = new Date(((await pool.query(`SELECT now() AS n`)).rows[0].n as Date).getTime() + 60_000);
  });

  const runsOf = async (triggerId: number) => (await pool.query(`SELECT count(*)::int AS n FROM runs WHERE trigger_id = $1`, [triggerId])).rows[0].n as number;
  const ticksOf = async (triggerId: number) =>
    (await pool.query(`SELECT id, outcome, detail, run_id FROM trigger_ticks WHERE trigger_id = $1 ORDER BY id`, [triggerId])).rows as Array<{ id: string; outcome: string; detail: string | null; run_id: number | null }>;

  /** After the passes that did the work, another pass finds nothing left to do. */
  async function settled(d: LaunchDeps) {
    const again = await launchOnce(d, later);
    expect(again.claimed).toEqual({ oneShots: 0, deliveries: 0, schedules: 0, missed: 0, launches: 0 });
    expect(again.fired).toEqual([]);
    expect(again.failed).toEqual([]);
  }

  it('a one-shot whose values the ledger cannot hold: marked failed, the one-shots around it fire', async () => {
    const before = await oneShotAdd(pool, { template: 't', at: 'now', actor: 'test' });
    // A `sets` that is a JSON string, not a list: the tick's text[] column refuses it (22P02).
    const bad = Number(
      (await pool.query(`INSERT INTO one_shots (id, template, fire_at, sets) VALUES (nextval('trigger_id_seq'), 't', now(), '"not-a-list"') RETURNING id`)).rows[0].id,
    );
    const after = await oneShotAdd(pool, { template: 't', at: 'now', actor: 'test' });
    const d = deps(pool);
    const passes = await drain(d, later);

    expect(await runsOf(before.id)).toBe(1);
    expect(await runsOf(after.id)).toBe(1);
    expect(await runsOf(bad)).toBe(0);
    const [tick] = await ticksOf(bad);
    expect(tick.outcome).toBe('failed');
    expect(tick.detail).toMatch(/malformed array literal.*\(SQLSTATE 22P02\)/);
    expect(passes.flatMap((p) => p.failed)).toEqual([{ tickId: Number(tick.id), reason: tick.detail }]);
    // Claimed once and done with: not pending, not retried.
    expect((await pool.query(`SELECT status FROM one_shots WHERE id = $1`, [bad])).rows[0].status).toBe('fired');
    await settled(d);
  });

  it('webhook deliveries: a NUL escaped in a mapped value, and a webhook whose maps cannot be read; the others fire', async () => {
    const hook = await webhookAdd(pool, { template: 't', maps: ['env.GIT_REF=$.ref'], actor: 'test' });
    const broken = await webhookAdd(pool, { template: 't', maps: ['env.GIT_REF=$.ref'], actor: 'test' });
    await pool.query(`UPDATE webhooks SET maps = '{"not": "a list"}' WHERE id = $1`, [broken.id]);
    const shot = await oneShotAdd(pool, { template: 't', at: 'now', actor: 'test' });

    // Recorded straight into the store, past the check the HTTP route makes.
    const nul = await deliveryInsert(pool, { webhookId: hook.id, deliveryKey: 'nul', signature: 's-nul', payload: '{"ref":"a\\u0000b"}' });
    const unreadable = await deliveryInsert(pool, { webhookId: broken.id, deliveryKey: 'maps', signature: 's-maps', payload: '{"ref":"main"}' });
    const good = await deliveryInsert(pool, { webhookId: hook.id, deliveryKey: 'good', signature: 's-good', payload: '{"ref":"refs/heads/main"}' });
    const d = deps(pool);
    await drain(d, later);

    const byDelivery = new Map(
      (await pool.query(`SELECT delivery_id, outcome, detail, run_id FROM trigger_ticks WHERE kind = 'webhook'`)).rows.map((r) => [Number(r.delivery_id), r]),
    );
    expect(byDelivery.get(nul!.id)).toMatchObject({ outcome: 'failed', detail: 'payload $.ref (--map env.GIT_REF=$.ref): contains a NUL character', run_id: null });
    expect(byDelivery.get(unreadable!.id)).toMatchObject({ outcome: 'failed', run_id: null });
    expect(byDelivery.get(unreadable!.id).detail).toMatch(/not a function|not iterable/);
    expect(byDelivery.get(good!.id)).toMatchObject({ outcome: 'fired', run_id: expect.any(Number) });
    const env = (await pool.query(`SELECT s.env FROM steps s WHERE s.run_id = $1`, [byDelivery.get(good!.id).run_id])).rows[0].env;
    expect(env).toEqual({ GIT_REF: 'refs/heads/main' });
    expect(await runsOf(shot.id)).toBe(1);
    expect(await runsOf(broken.id)).toBe(0);
    expect((await pool.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`)).rows[0].n).toBe(0);
    await settled(d);
  });

  it('schedules: values the ledger cannot hold (moved on) and a cron that cannot be read (disabled); the others fire', async () => {
    const good = await scheduleAdd(pool, { template: 't', cron: '* * * * *', actor: 'test' });
    await pool.query(`UPDATE schedules SET next_due_at = date_trunc('minute', now()) WHERE id = $1`, [good.id]);
    const badSets = Number(
      (await pool.query(`INSERT INTO schedules (template, cron, sets, next_due_at) VALUES ('t', '* * * * *', '"not-a-list"', date_trunc('minute', now())) RETURNING id`)).rows[0].id,
    );
    const badCron = Number((await pool.query(`INSERT INTO schedules (template, cron, next_due_at) VALUES ('t', 'not a cron', date_trunc('minute', now())) RETURNING id`)).rows[0].id);
    const shot = await oneShotAdd(pool, { template: 't', at: 'now', actor: 'test' });
    const d = deps(pool);
    await drain(d, later);

    expect(await runsOf(good.id)).toBe(1);
    expect(await runsOf(shot.id)).toBe(1);

    expect(await runsOf(badSets)).toBe(0);
    const setsTicks = await ticksOf(badSets);
    expect(setsTicks.map((t) => t.outcome)).toEqual(['failed']);
    expect(setsTicks[0].detail).toMatch(/malformed array literal/);
    const setsRow = (await pool.query(`SELECT enabled, next_due_at FROM schedules WHERE id = $1`, [badSets])).rows[0];
    expect(setsRow.enabled).toBe(true);
    expect(setsRow.next_due_at.getTime()).toBeGreaterThan(later.getTime());

    expect(await runsOf(badCron)).toBe(0);
    const cronTicks = await ticksOf(badCron);
    expect(cronTicks.map((t) => t.outcome)).toEqual(['failed']);
    expect(cronTicks[0].detail).toMatch(/the schedule was disabled \(its next tick cannot be computed\)$/);
    expect((await pool.query(`SELECT enabled FROM schedules WHERE id = $1`, [badCron])).rows[0].enabled).toBe(false);
    await settled(d);
  });

  it('an undispatched launch whose template cannot become a run: marked failed, the launches behind it fire', async () => {
    // A stored definition the edge would refuse, written past it.
    await pool.query(`INSERT INTO run_templates (name, version, source) VALUES ('bomb', 1, $1)`, [ALIAS_BOMB]);
    const bad = Number(
      (await pool.query(`INSERT INTO trigger_ticks (trigger_id, kind, template, due_at, recorded_at, outcome) VALUES (424242, 'once', 'bomb', now() - interval '1 minute', now() - interval '1 minute', 'pending') RETURNING id`))
        .rows[0].id,
    );
    const shots = [await oneShotAdd(pool, { template: 't', at: 'now', actor: 'test' }), await oneShotAdd(pool, { template: 't', at: 'now', actor: 'test' })];
    const d = deps(pool);
    const passes = await drain(d, later);

    for (const s of shots) expect(await runsOf(s.id)).toBe(1);
    const tick = (await pool.query(`SELECT outcome, detail, run_id FROM trigger_ticks WHERE id = $1`, [bad])).rows[0];
    expect(tick).toMatchObject({ outcome: 'failed', run_id: null });
    expect(tick.detail).toMatch(/alias/i);
    expect(passes.flatMap((p) => p.failed).map((f) => f.tickId)).toEqual([bad]);
    expect((await pool.query(`SELECT count(*)::int AS n FROM runs WHERE template_name = 'bomb'`)).rows[0].n).toBe(0);
    await settled(d);
  });
});
