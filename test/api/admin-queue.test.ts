import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { insertLease, insertRunner } from '../support/fleet.js';
import { seedRun } from '../support/seed.js';
import { startTestServer } from '../support/server.js';

describe('GET /api/admin/queue and /api/fleet/runners', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let admin: string;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { ops: true } });
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ops' })).secret;
  });
  afterAll(async () => server?.stop());

  const get = async (path: string, token: string | null = admin) => {
    const res = await fetch(`${server.url}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
    return { status: res.status, body: (await res.json()) as any };
  };

  it('is closed without an admin token', async () => {
    expect((await get('/api/admin/queue', null)).status).toBe(401);
    expect((await get('/api/fleet/runners', null)).status).toBe(401);
    expect((await get('/api/admin/queue', 'ocadm_not-a-real-token')).status).toBe(401);
  });

  it('answers the aggregate view: lanes, leases with their run, verdict groups, runners', async () => {
    await insertRunner(db.current.pool, { id: 'r-api', name: 'api-runner', maxLoad: 3 });
    const { runId } = await seedRun(db.current.pool, { steps: [{ name: 'a' }, { name: 'b' }, { name: 'c', priority: 120 }] });
    await insertLease(db.current.pool, { stepId: 9_000, runId, runnerId: 'r-api', load: 2 });
    const q = await get('/api/admin/queue?limit=5');
    expect(q.status).toBe(200);
    expect(q.body.lanes.map((l: any) => [l.lane, l.ready, l.readyEstimated, l.leased])).toEqual([
      ['system', 1, false, 0],
      ['interactive', 0, false, 0],
      ['bulk', 2, false, 1],
    ]);
    expect(q.body.leases).toMatchObject({ total: 1, shown: 1, items: [{ stepId: 9_000, runId, run: 'seed', runner: 'api-runner', holder: 'replica-test', delivered: true }] });
    expect(q.body.waiting).toMatchObject({ ready: 3, sampled: false, groups: [{ code: 'waiting_for_tick', count: 3 }] });
    expect(q.body.runners).toEqual([expect.objectContaining({ name: 'api-runner', load: { used: 2, max: 3 }, state: 'online', drained: false })]);
    expect(q.body.shards).toHaveLength(64);

    const r = await get('/api/fleet/runners');
    expect(r.body.summary).toMatchObject({ total: 1, online: 1, loadUsed: 2, loadMax: 3 });
  });

  it('refuses a bad limit, naming it', async () => {
    const bad = await get('/api/admin/queue?limit=0');
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/limit/);
    expect((await get('/api/admin/queue?lmit=5')).status).toBe(400);
  });
});
