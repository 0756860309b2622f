import { describe, expect, it } from 'vitest';
import { LivenessBatch } from '../../src/api/liveness-batch.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { createPool } from '../../src/store/pool.js';
import { runnerLivenessSweep } from '../../src/store/runner-liveness.js';
import { useTestDatabase } from '../support/db.js';
import { registerRunner } from '../support/lifecycle.js';

describe('liveness written per batch of runners (LivenessBatch)', () => {
  const db = useTestDatabase();
  const log = createLogger('silent', { pretty: false });
  const fakeClock = () => {
    const c = { t: 1_000_000, now: () => c.t, sleep: systemClock.sleep };
    return c;
  };

  /** Counts the statements that write liveness (a statement-level trigger fires once per statement). */
  const countStatements = async () => {
    await db.current.pool.query(`
      CREATE TABLE IF NOT EXISTS touch_statements (n int NOT NULL);
      INSERT INTO touch_statements SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM touch_statements);
      UPDATE touch_statements SET n = 0;
      CREATE OR REPLACE FUNCTION count_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE touch_statements SET n = n + 1; RETURN NULL; END $$;
      DROP TRIGGER IF EXISTS count_touch ON runners;
      CREATE TRIGGER count_touch AFTER UPDATE OF last_seen_at ON runners FOR EACH STATEMENT EXECUTE FUNCTION count_touch();`);
    return async () => (await db.current.pool.query(`SELECT n FROM touch_statements`)).rows[0].n as number;
  };

  it('runners seen at different moments are written by one statement, each stamped when it was seen', async () => {
    const pool = db.current.pool;
    for (const id of ['lb_a', 'lb_b', 'lb_c']) await registerRunner(pool, id, id);
    await pool.query(`UPDATE runners SET last_seen_at = '2000-01-01', state = 'offline', last_replica = NULL`);
    const statements = await countStatements();
    const clock = fakeClock();
    const batch = new LivenessBatch({ pool, replicaId: 'replica-lb', clock, log });
    const touched = [batch.touch('lb_a')];
    clock.t += 400;
    touched.push(batch.touch('lb_b'), batch.touch('lb_a'));
    clock.t += 600;
    expect(await batch.flush()).toBe(2);
    await Promise.all(touched);
    expect(await statements()).toBe(1);
    const { rows } = await pool.query(
      `SELECT id, state, last_replica, extract(epoch FROM (now() - last_seen_at)) * 1000 AS age_ms FROM runners ORDER BY id`,
    );
    expect(rows.map((r) => ({ id: r.id, state: r.state, last_replica: r.last_replica }))).toEqual([
      { id: 'lb_a', state: 'online', last_replica: 'replica-lb' },
      { id: 'lb_b', state: 'online', last_replica: 'replica-lb' },
      { id: 'lb_c', state: 'offline', last_replica: null },
    ]);
    // One statement, one now(): the stamps differ by exactly the 400 ms between the sightings.
    const { rows: diff } = await pool.query(`SELECT extract(epoch FROM (b.last_seen_at - a.last_seen_at)) * 1000 AS ms FROM runners a, runners b WHERE a.id = 'lb_a' AND b.id = 'lb_b'`);
    expect(Number(diff[0].ms)).toBe(400);
    // Nothing seen since: a flush sends nothing.
    expect(await batch.flush()).toBe(0);
    expect(await statements()).toBe(1);
  });

  it('never moves a runner\'s last sighting backwards (a later one on another replica stands)', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'lb_later', 'lb_later');
    await pool.query(`UPDATE runners SET last_seen_at = now() + interval '1 hour' WHERE id = 'lb_later'`);
    const before = (await pool.query(`SELECT last_seen_at FROM runners WHERE id = 'lb_later'`)).rows[0].last_seen_at as Date;
    const batch = new LivenessBatch({ pool, replicaId: 'replica-lb', clock: fakeClock(), log });
    const t = batch.touch('lb_later');
    await batch.flush();
    await t;
    expect((await pool.query(`SELECT last_seen_at FROM runners WHERE id = 'lb_later'`)).rows[0].last_seen_at).toEqual(before);
  });

  it('offline detection reads the sighting, not the flush: a runner last seen two windows before a late flush is still judged offline', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'lb_quiet', 'lb_quiet');
    await registerRunner(pool, 'lb_busy', 'lb_busy');
    await pool.query(`UPDATE runners SET last_seen_at = '2000-01-01', state = 'online' WHERE id IN ('lb_quiet', 'lb_busy')`);
    const clock = fakeClock();
    const batch = new LivenessBatch({ pool, replicaId: 'replica-lb', clock, log });
    const quiet = batch.touch('lb_quiet');
    clock.t += 2_500;
    const busy = batch.touch('lb_busy');
    await batch.flush();
    await Promise.all([quiet, busy]);
    const changes = await runnerLivenessSweep(pool, { pollWindowMs: 1_000, graceMs: 0 });
    const states = Object.fromEntries((await pool.query(`SELECT id, state FROM runners WHERE id IN ('lb_quiet', 'lb_busy')`)).rows.map((r) => [r.id, r.state]));
    expect(states).toEqual({ lb_quiet: 'offline', lb_busy: 'online' });
    expect(changes).toContainEqual({ runnerId: 'lb_quiet', from: 'online', to: 'offline' });
  });

  it('a flush that fails fails the touches it carried, and the next flush carries only what came after', async () => {
    const broken = createPool(db.current.url, { max: 1 });
    await broken.end();
    const batch = new LivenessBatch({ pool: broken, replicaId: 'replica-lb', clock: fakeClock(), log });
    const t = batch.touch('lb_x');
    await expect(batch.flush()).rejects.toThrow();
    await expect(t).rejects.toThrow();
    expect(await batch.flush()).toBe(0);
  });

  it('stop writes what is pending and stops the loop', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'lb_stop', 'lb_stop');
    await pool.query(`UPDATE runners SET last_seen_at = '2000-01-01' WHERE id = 'lb_stop'`);
    const batch = new LivenessBatch({ pool, replicaId: 'replica-stop', clock: fakeClock(), log, flushEveryMs: 3_600_000 });
    batch.start();
    const t = batch.touch('lb_stop');
    await batch.stop();
    await t;
    expect((await pool.query(`SELECT last_replica FROM runners WHERE id = 'lb_stop'`)).rows[0].last_replica).toBe('replica-stop');
    await batch.stop();
  });
});
