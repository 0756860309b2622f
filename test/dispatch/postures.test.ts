import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expireOnce } from '../../src/dispatch/lifecycle.js';
import { postureExpiryPass } from '../../src/dispatch/postures.js';
import { LeverInputError, parseUntil, postureLever } from '../../src/ops/domain/postures.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { seedRun } from '../support/seed.js';
import { leaderDuties } from '../../src/features.js';
import { justPast } from '../support/lifecycle.js';
import { startTestServer } from '../support/server.js';

describe('postures: reason, actor, until, and what each one holds', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let reg: string;

  beforeAll(async () => {
    server = await startTestServer(db.current.url, {
      plan: {
        coordination: { timing: { tickMs: 200 }, leaderDuties: [leaderDuties.postureExpiry] },
        dispatch: { hooks: orchestratorHooks, ownExpiryLoop: false },
      },
      config: { leaseTtlMs: 60_000, pollWindowMs: 10_000 },
    });
    reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'r' })).secret;
  });
  afterAll(async () => server?.stop());

  const pool = () => db.current.pool;
  const queued = async () => (await pool().query('SELECT count(*)::int AS n FROM queue_ready')).rows[0].n as number;

  it('parses --until as a duration or a zoned ISO time, and refuses anything else', () => {
    expect(parseUntil('3s')).toEqual({ afterMs: 3_000 });
    expect(parseUntil('1h30m')).toEqual({ afterMs: 5_400_000 });
    expect(parseUntil('2030-01-01T00:00:00Z')).toEqual({ at: new Date('2030-01-01T00:00:00Z') });
    for (const bad of ['soon', '2030-01-01', '2030-01-01T00:00:00', '-3s', '']) expect(() => parseUntil(bad), bad).toThrow(LeverInputError);
  });

  it('refuses an --until in the past or on a lift, writing nothing', async () => {
    await expect(postureLever(pool(), { fields: ['quiesced'], value: true, until: { at: new Date('2000-01-01T00:00:00Z') }, actor: 'alice' })).rejects.toThrow(/not in the future/);
    await expect(postureLever(pool(), { fields: ['quiesced'], value: false, until: { afterMs: 1000 }, actor: 'alice' })).rejects.toThrow(/only a posture being put in force/);
    expect((await pool().query('SELECT quiesced FROM fleet_posture')).rows[0].quiesced).toBe(false);
    expect((await pool().query('SELECT count(*)::int AS n FROM audit_log')).rows[0].n).toBe(0);
  });

  it('system quiesce holds offers and keeps the expiry sweep running; halt holds both', async () => {
    const r = await new TestRunner(server.url).register(reg, { max_load: 4 });
    // One step delivered before the posture, its runner then silent: a lease due to expire.
    await seedRun(pool(), { steps: [{ name: 'running' }] });
    const first = await r.acquire();
    expect(first.status).toBe(200);
    await r.call('ack', { leases: [{ step_id: first.body.offers[0].step_id, token: first.body.offers[0].token }] });
    await seedRun(pool(), { steps: [{ name: 'waiting' }] });

    const q = await postureLever(pool(), { fields: ['system_quiesced'], value: true, reason: 'store upgrade', actor: 'alice' });
    expect(q).toMatchObject({ changed: true, applied: ['system_quiesced'], posture: { systemQuiesced: true, quiesced: false, halted: false } });
    expect(q.posture.holds).toEqual([{ posture: 'system_quiesced', reason: 'store upgrade', actor: 'alice', since: expect.any(String), until: null }]);
    expect((await r.acquire({ wait_ms: 600 })).status).toBe(204);
    expect(await queued()).toBe(1);

    const past = await justPast(pool(), 'expires_at');
    await postureLever(pool(), { fields: ['halted'], value: true, reason: 'incident', actor: 'bob' });
    expect(await expireOnce(server.replica.dispatcher!, { now: past })).toMatchObject({ halted: true, lost: 0 });
    // Lifting the halt leaves the system quiesce: the sweep runs, offers stay held.
    await postureLever(pool(), { fields: ['halted'], value: false, actor: 'bob' });
    expect(await expireOnce(server.replica.dispatcher!, { now: past })).toMatchObject({ halted: false, lost: 1 });
    expect((await r.acquire({ wait_ms: 600 })).status).toBe(204);

    const resumed = await postureLever(pool(), { fields: ['halted', 'system_quiesced'], value: false, reason: 'done', actor: 'alice' });
    expect(resumed).toMatchObject({ changed: true, applied: ['system_quiesced'], posture: { systemQuiesced: false, holds: [] } });
    expect((await r.acquire({ wait_ms: 5_000 })).status).toBe(200);
    const again = await postureLever(pool(), { fields: ['halted', 'system_quiesced'], value: false, actor: 'alice' });
    expect(again).toMatchObject({ changed: false, applied: [] });
  });

  it('a posture with --until 3s lifts itself on the leader, and the audit shows the lift with its actor', async () => {
    const pulled = await postureLever(pool(), { fields: ['quiesced'], value: true, reason: 'deploy', until: parseUntil('3s'), actor: 'cli:carol', source: 'cli' });
    const until = new Date(pulled.posture.holds[0].until!);
    const since = new Date(pulled.posture.holds[0].since);
    expect(until.getTime() - since.getTime()).toBeGreaterThanOrEqual(2_900);
    expect(until.getTime() - since.getTime()).toBeLessThanOrEqual(3_100);
    // Pulling it again with a later --until moves the expiry, and says so.
    const moved = await postureLever(pool(), { fields: ['quiesced'], value: true, until: parseUntil('4s'), actor: 'cli:carol' });
    expect(moved).toMatchObject({ changed: false, untilMoved: true });

    await waitFor(async () => !(await pool().query('SELECT quiesced FROM fleet_posture')).rows[0].quiesced, { timeoutMs: 30_000, what: 'the leader to lift the quiesce' });
    const { rows } = await pool().query(`SELECT actor, action, source, detail, at FROM audit_log WHERE target = 'fleet' ORDER BY id`);
    expect(rows.map((r) => r.action)).toEqual(['server.quiesce', 'server.quiesce.until', 'server.resume']);
    const lift = rows[2];
    expect(lift.actor).toBe(`leader:${server.replica.replicaId}`);
    expect(lift.source).toBe('until');
    expect(lift.detail).toMatchObject({ posture: 'quiesced', reason: `--until ${lift.detail.until} passed`, expired: true, held_by: 'cli:carol', held_reason: 'deploy' });
    // Lifted at or after its time by the store's clock, never before.
    expect(new Date(lift.at).getTime()).toBeGreaterThanOrEqual(new Date(lift.detail.until).getTime());
    expect((await pool().query('SELECT count(*)::int AS n FROM posture_holds')).rows[0].n).toBe(0);
  });

  it('the leader\'s pass judges --until at the time it is given: not a moment before, and at it', async () => {
    const pulled = await postureLever(pool(), { fields: ['system_quiesced'], value: true, reason: 'window', until: parseUntil('1h'), actor: 'cli:dave' });
    const until = new Date(pulled.posture.holds[0].until!);
    const leader = { pool: pool(), replicaId: 'leader-test' };
    expect(await postureExpiryPass(leader, { now: new Date(until.getTime() - 1) })).toEqual([]);
    expect((await pool().query('SELECT system_quiesced FROM fleet_posture')).rows[0].system_quiesced).toBe(true);
    // The stored until has microseconds, a Date only milliseconds: one past it is past it.
    const lifted = await postureExpiryPass(leader, { now: new Date(until.getTime() + 1) });
    expect(lifted.map((h) => [h.posture, h.actor])).toEqual([['system_quiesced', 'cli:dave']]);
    expect((await pool().query('SELECT system_quiesced FROM fleet_posture')).rows[0].system_quiesced).toBe(false);
    const { rows } = await pool().query(`SELECT actor, source FROM audit_log WHERE detail->>'posture' = 'system_quiesced' AND source = 'until'`);
    expect(rows).toEqual([{ actor: 'leader:leader-test', source: 'until' }]);
  });
});
