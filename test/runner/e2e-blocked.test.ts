import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fleetQueue } from '../../src/ops/domain/fleet.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import { poolLimitSet } from '../../src/store/pools.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { Fleet } from './e2e-support.js';

const steps = (n: number, prefix: string, extra: Record<string, unknown> = {}) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, { run: 'true', ...extra }]));

/**
 * The report as it happened: a pool at its limit with its holder running, entries for a label no
 * runner has and for a drained group (some in the system lane), and an idle runner `vm` that
 * must still get a plain run at once.
 */
describe('no step waits behind one it cannot pass (real server, real runners)', { timeout: 150_000 }, () => {
  const db = useTestDatabase();
  let fleet: Fleet;
  beforeAll(async () => {
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer({ leaseTtlMs: 30_000 });
  });
  afterAll(async () => {
    await fleet?.stopAll();
    fleet?.cleanup();
  });

  it('a plain run reaches the idle runner within seconds behind 170 blocked entries, and every blocked entry says why', async () => {
    const pool = db.current.pool;
    await poolLimitSet(pool, { name: 'db', limit: 1 });
    const holder = fleet.runner('holder', ['--label', 'holder', '--max-load', '4']);
    await fleet.ready(holder);
    const holding = await fleet.submit({ name: 'holding', placement: { labels: ['holder'] }, steps: { hold: { run: 'sleep 300', pools: ['db'] } } });
    await waitFor(async () => (await pool.query(`SELECT 1 FROM pool_holds`)).rowCount === 1, { what: 'the holder to take the pool' });
    const old = fleet.runner('old', ['--group', 'legacy']);
    await fleet.ready(old);
    await fleetDrainSet(pool, { group: 'legacy', drained: true, reason: 'retiring', actor: 'test' });

    await fleet.submit({ name: 'pooled', priority: 60, steps: steps(60, 'p', { pools: ['db'] }) });
    await fleet.submit({ name: 'gpu', placement: { labels: ['gpu'] }, steps: steps(75, 'g') });
    await fleet.submit({ name: 'legacy', placement: { group: 'legacy' }, steps: steps(30, 'l') });
    await fleet.submit({ name: 'urgent', priority: 150, placement: { group: 'legacy' }, steps: steps(5, 'u') });
    await waitFor(async () => Number((await pool.query(`SELECT count(*) FROM queue_ready`)).rows[0].count) === 170, { what: 'the blockers to be queued' });

    const vm = fleet.runner('vm', ['--max-load', '2']);
    await fleet.ready(vm);
    const started = Date.now();
    const plain = await fleet.submit({ name: 'hello', steps: { hello: { run: 'echo hello' } } });
    expect(await fleet.runDone(plain, 30_000)).toMatchObject({ status: 'succeeded' });
    const tookMs = Date.now() - started;
    expect(tookMs).toBeLessThan(20_000);

    // Every blocker is set aside, and its verdict is its real reason, never "waiting for a dispatch tick".
    await waitFor(async () => Number((await pool.query(`SELECT count(*) FROM queue_ready WHERE blocked_on IS NULL`)).rows[0].count) === 0, { what: 'every blocker to be set aside' });
    const view = await fleetQueue({ pool, actor: 'test', source: 'test' }, {});
    const ready = view.entries.filter((e) => e.state === 'ready');
    expect(ready).toHaveLength(170);
    expect(view.summary.byCode.waiting_for_tick ?? 0).toBe(0);
    const codes = (name: string) => new Set(ready.filter((e) => e.step?.startsWith(name)).map((e) => `${e.verdict.code}@${e.blockedOn}`));
    expect(codes('p')).toEqual(new Set(['pool_full@pool:db']));
    expect(codes('g')).toEqual(new Set(['no_runner_matches@fleet']));
    expect(codes('l')).toEqual(new Set(['all_matches_drained@fleet']));
    expect(codes('u')).toEqual(new Set(['all_matches_drained@fleet']));

    // Undrained, the group's runner takes its 35 (the system lane's five among them) by itself.
    await fleetDrainSet(pool, { group: 'legacy', drained: false, actor: 'test' });
    await waitFor(async () => Number((await pool.query(`SELECT count(*) FROM steps s JOIN runs r ON r.id = s.run_id WHERE r.name IN ('legacy', 'urgent') AND s.status = 'succeeded'`)).rows[0].count) === 35, { timeoutMs: 60_000, what: 'the legacy steps to run' });
    expect(holding).toBeGreaterThan(0);
  });
});
