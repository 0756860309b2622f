import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverPlan } from '../../src/features.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';

describe('runner liveness', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let runners: TestRunner[];

  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: serverPlan(), config: { pollWindowMs: 10_000 } });
    const reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'r' })).secret;
    runners = await Promise.all(Array.from({ length: 12 }, (_, i) => new TestRunner(server.url).register(reg, { name: `live-${i}` })));
  });
  afterAll(async () => server?.stop());

  it('runners polling in one burst are recorded online on this replica, together', async () => {
    await db.current.pool.query(`UPDATE runners SET last_seen_at = '2000-01-01', last_replica = NULL, state = 'offline'`);
    // Counts the statements that write liveness (a statement-level trigger fires once per statement).
    await db.current.pool.query(`
      CREATE TABLE touch_statements (n int NOT NULL);
      INSERT INTO touch_statements VALUES (0);
      CREATE FUNCTION count_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE touch_statements SET n = n + 1; RETURN NULL; END $$;
      CREATE TRIGGER count_touch AFTER UPDATE OF last_seen_at ON runners FOR EACH STATEMENT EXECUTE FUNCTION count_touch();`);
    const answers = await Promise.all(runners.map((r) => r.acquire({ wait_ms: 0 })));
    expect(answers.map((a) => a.status)).toEqual(runners.map(() => 204));
    const want = runners.map((r) => ({ id: r.runnerId, state: 'online', seen: true }));
    const read = async () =>
      (await db.current.pool.query(`SELECT id, state, last_seen_at > '2000-01-01' AS seen FROM runners WHERE last_replica IS NOT NULL ORDER BY name`)).rows;
    // The liveness write is not awaited by the poll: wait for it.
    const deadline = Date.now() + 10_000;
    while ((await read()).length < runners.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const rows = await read();
    expect(rows.sort((a, b) => a.id.localeCompare(b.id))).toEqual(want.sort((a, b) => a.id.localeCompare(b.id)));
    const { rows: replicas } = await db.current.pool.query(`SELECT DISTINCT last_replica FROM runners`);
    expect(replicas).toHaveLength(1);
    // The runners seen together were written together: a handful of statements, not one per runner.
    const { rows: count } = await db.current.pool.query(`SELECT n FROM touch_statements`);
    expect(count[0].n).toBeGreaterThanOrEqual(1);
    expect(count[0].n).toBeLessThanOrEqual(3);
  });
});
