import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { benchRunFile } from '../../bench/opschain.js';
import { prequeue, readyCount } from '../../bench/prequeue.js';
import { SimFleet } from '../../bench/sim-fleet.js';
import { serverPlan } from '../../src/features.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { startTestServer } from '../support/server.js';

/** The bench's simulated runners against a real in-process replica: they must speak the protocol the server serves. */
describe('bench simulated fleet', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let token: string;
  let fleet: SimFleet | undefined;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: serverPlan() });
    token = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'bench-test' })).secret;
  });
  afterEach(async () => {
    await fleet?.stop();
    fleet = undefined;
    // The server drops a stopped runner's parked poll when it sees the connection close; until
    // then a tick could hand that poll the next test's entries.
    await waitFor(() => server.replica.dispatcher!.registry.size === 0, { what: 'no poll left parked' });
  });
  afterAll(async () => server?.stop());

  it('drains submitted runs: every step offered once and completed, every run succeeded', async () => {
    const runIds: number[] = [];
    for (let i = 0; i < 3; i++) runIds.push((await runSubmit(db.current.pool, benchRunFile(`sim-${i}`, 'bench', 4), { actor: 'test' })).runId);
    const offered: number[] = [];
    fleet = new SimFleet({ urls: [server.url], registrationToken: token, runners: 3, slots: 2, waitMs: 2_000, onOffer: (o) => offered.push(o.step_id) });
    await fleet.register();
    fleet.start();
    await fleet.until((c) => c.completed >= 12, 30_000, '12 completions');
    expect(new Set(offered).size).toBe(12);
    expect(offered).toHaveLength(12);
    expect(fleet.counters.refused).toBe(0);
    const { rows } = await db.current.pool.query(`SELECT status FROM runs WHERE id = ANY($1::bigint[])`, [runIds]);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  });

  it('bulk-queued entries are taken like submitted ones, and stop() ends parked polls', async () => {
    await prequeue(db.current.pool, { entries: 20, stepsPerRun: 10, label: 'bulk' });
    expect(await readyCount(db.current.pool)).toBe(20);
    fleet = new SimFleet({ urls: [server.url], registrationToken: token, runners: 2, slots: 4, waitMs: 30_000, namePrefix: 'bulk' });
    await fleet.register();
    fleet.start();
    await fleet.until((c) => c.completed >= 20 && c.parked === 2, 30_000, 'the bulk entries drained and both runners parked again');
    expect(await readyCount(db.current.pool)).toBe(0);
    const { rows } = await db.current.pool.query(`SELECT status, count(*)::int AS n FROM runs WHERE name = 'bulk' GROUP BY status`);
    expect(rows).toEqual([{ status: 'succeeded', n: 2 }]);
    await fleet.stop();
    expect(fleet.counters.parked).toBe(0);
  });
});
