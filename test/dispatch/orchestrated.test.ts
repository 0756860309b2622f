import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverPlan } from '../../src/features.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';

const DIAMOND = `
name: diamond
steps:
  a: { run: "echo a" }
  b: { run: "echo b", needs: [a] }
  c: { run: "echo c", needs: [a] }
  d: { run: "echo d", needs: [b, c] }
`;

// Both ways a server can send its hot statements: prepared (the default) and unnamed (store.prepared_statements: false).
describe.each([{ prepared: true }, { prepared: false }])('the dispatch plane driving the orchestrator (prepared statements: $prepared)', ({ prepared }) => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let runner: TestRunner;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: serverPlan(), config: { preparedStatements: prepared } });
    const { secret } = await tokenCreate(db.current.pool, { kind: 'registration', name: 't' });
    runner = await new TestRunner(server.url).register(secret);
  });
  afterAll(async () => server?.stop());

  /** Plays a runner: takes offers, completes each with the exit code `exit(step)` says, records the order. */
  async function drive(runId: number, exit: (step: string) => number) {
    const order: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { rows } = await db.current.pool.query('SELECT status FROM runs WHERE id = $1', [runId]);
      if (rows[0].status !== 'running') break;
      const res = await runner.acquire({ max_offers: 4, wait_ms: 1_000 });
      if (res.status === 204) continue;
      for (const o of res.body.offers) order.push(o.step);
      await runner.call('ack', { leases: res.body.offers.map((o: any) => ({ step_id: o.step_id, token: o.token })) });
      await runner.call('complete', { completions: res.body.offers.map((o: any) => ({ step_id: o.step_id, token: o.token, exit_code: exit(o.step) })) });
    }
    return order;
  }

  it('runs a diamond in dependency order, each step once', async () => {
    const { runId } = await runSubmit(db.current.pool, runFileLoad(DIAMOND), { actor: 'test' });
    const order = await drive(runId, () => 0);
    expect(order[0]).toBe('a');
    expect(order.slice(1, 3).sort()).toEqual(['b', 'c']);
    expect(order[3]).toBe('d');
    expect(order).toHaveLength(4);
    const run = await waitFor(async () => (await db.current.pool.query(`SELECT status FROM runs WHERE id = $1 AND status <> 'running'`, [runId])).rows[0]);
    expect(run.status).toBe('succeeded');
    const { rows } = await db.current.pool.query('SELECT name, status, attempt, runner_id FROM steps WHERE run_id = $1 ORDER BY name', [runId]);
    expect(rows.every((r) => r.status === 'succeeded' && r.attempt === 1 && r.runner_id === runner.runnerId)).toBe(true);
  });

  it('a failing step fails the run and skips its dependents', async () => {
    const { runId } = await runSubmit(db.current.pool, runFileLoad(DIAMOND), { actor: 'test' });
    const order = await drive(runId, (s) => (s === 'b' ? 3 : 0));
    expect(order).not.toContain('d');
    const { rows } = await db.current.pool.query('SELECT name, status FROM steps WHERE run_id = $1 ORDER BY name', [runId]);
    expect(Object.fromEntries(rows.map((r) => [r.name, r.status]))).toEqual({ a: 'succeeded', b: 'failed', c: 'succeeded', d: 'skipped' });
    expect((await db.current.pool.query('SELECT status FROM runs WHERE id = $1', [runId])).rows[0].status).toBe('failed');
  });
});
