import { describe, expect, it } from 'vitest';
import { adminQueueRead, queueLaneDepth } from '../../src/store/admin-queue.js';
import { coordinationLeaseAcquire, shardLeaseName, LEADER_LEASE } from '../../src/store/coordination.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import type { PoolClient } from '../../src/store/pool.js';
import { postureSet } from '../../src/store/posture.js';
import { buildAdminQueue } from '../../src/views/admin-queue.js';
import { useTestDatabase } from '../support/db.js';
import { insertLease, insertRunner } from '../support/fleet.js';

/** Ready entries straight into queue_ready: lane 0 every tenth, lane 1 two in ten, the rest bulk. */
async function fill(db: { query: (sql: string, params: unknown[]) => Promise<unknown> }, from: number, to: number): Promise<void> {
  await db.query(
    `INSERT INTO queue_ready (step_id, run_id, shard, attempt, priority, lane, fair_key, ready_at)
     SELECT g, 1000000 + g / 10, (g / 10) % 64, 1, 0, CASE WHEN g % 10 = 0 THEN 0 WHEN g % 10 < 3 THEN 1 ELSE 2 END,
            'proj-' || (g % 3), now() - (($2::int - g) * interval '1 millisecond')
       FROM generate_series($1::int, $2::int) g`,
    [from, to],
  );
}

/** Every statement the read model sends, counted by wrapping its client's query function. */
async function countedRead(pool: import('../../src/store/pool.js').Pool): Promise<{ statements: string[]; snapshot: Awaited<ReturnType<typeof adminQueueRead>> }> {
  const client = await pool.connect();
  const statements: string[] = [];
  const original = client.query.bind(client) as (...a: unknown[]) => unknown;
  (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...args: unknown[]) => {
    statements.push(typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string }).text));
    return original(...args);
  };
  try {
    const snapshot = await adminQueueRead(client as PoolClient, { limit: 50 });
    return { statements, snapshot };
  } finally {
    (client as unknown as { query: unknown }).query = original;
    client.release();
  }
}

describe('the admin queue read model', () => {
  const db = useTestDatabase();

  it('reads lanes, leases with names, projects, shards, leader, postures and drains in one snapshot', async () => {
    const pool = db.current.pool;
    const { rows: run } = await pool.query(`INSERT INTO runs (name, project, target, definition) VALUES ('deploy-web', 'acme', 'acme/prod/web', '{}') RETURNING id`);
    const runId = Number(run[0].id);
    const { rows: step } = await pool.query(`INSERT INTO steps (run_id, name, command, status, attempt) VALUES ($1, 'migrate', 'true', 'running', 1) RETURNING id`, [runId]);
    await insertRunner(pool, { id: 'r-1', name: 'build-1', labels: ['linux'], maxLoad: 2 });
    await insertRunner(pool, { id: 'r-2', name: 'build-2', labels: ['linux'] });
    await insertLease(pool, { stepId: Number(step[0].id), runId, runnerId: 'r-1', holder: 'rep-a' });
    await fill(pool, 1, 10);
    await pool.query(`UPDATE queue_ready SET requirement = '{"labels":["gpu"]}' WHERE step_id <= 2`);
    await coordinationLeaseAcquire(pool, { names: [0, 1, 2].map(shardLeaseName), holder: 'rep-a', ttlMs: 60_000 });
    await coordinationLeaseAcquire(pool, { names: [LEADER_LEASE], holder: 'rep-a', ttlMs: 60_000 });
    await pool.query(`INSERT INTO replicas (id, host, version) VALUES ('rep-a', 'h', '0')`);
    await fleetDrainSet(pool, { runner: 'build-2', drained: true, reason: 'kernel', actor: 'alice' });
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await postureSet(client, { field: 'quiesced', value: true, reason: 'deploy', actor: 'bob' });
      await client.query('COMMIT');
    } finally {
      client.release();
    }

    const s = await adminQueueRead(pool, { limit: 10 });
    expect(s.lanes.map((l) => [l.lane, l.ready, l.estimated])).toEqual([
      [0, 1, false],
      [1, 2, false],
      [2, 7, false],
    ]);
    expect(s.leasedByLane).toEqual({ 0: 0, 1: 0, 2: 1 });
    expect(s.leases).toHaveLength(1);
    expect(s.leases[0]).toMatchObject({ runName: 'deploy-web', target: 'acme/prod/web', stepName: 'migrate', holder: 'rep-a', runnerId: 'r-1' });
    expect(s.leases[0].ttlMs).toBe(180_000);
    expect(s.shardOwners.filter((o) => o === 'rep-a')).toHaveLength(3);
    expect(s.leader?.replicaId).toBe('rep-a');
    expect(s.drains).toEqual([expect.objectContaining({ kind: 'runner', key: 'r-2', name: 'build-2', reason: 'kernel', actor: 'alice' })]);
    expect(s.posture).toMatchObject({ fleetQuiesced: true, reason: 'deploy', actor: 'bob' });

    const v = buildAdminQueue(s, { acceptExceeding: true, stalenessMs: 15_000 });
    // Quiesced: every ready entry is held by the posture, whatever its placement.
    expect(v.waiting.groups.map((g) => [g.code, g.count])).toEqual([['quiesced', 10]]);
    expect(v.waiting.sampled).toBe(false);
    expect(v.lanes[2].oldestAgeMs).toBeGreaterThan(0);
    expect(v.leases.items[0]).toMatchObject({ run: 'deploy-web', runner: 'build-1', delivered: true, acked: false, renewed: false });
    expect(v.replicas).toMatchObject({ live: 1, total: 1 });

    // Lifted, the ladder tells the entries apart: two need a gpu label nobody has.
    const c2 = await pool.connect();
    try {
      await c2.query('BEGIN');
      await postureSet(c2, { field: 'quiesced', value: false, reason: null, actor: 'bob' });
      await c2.query('COMMIT');
    } finally {
      c2.release();
    }
    const v2 = buildAdminQueue(await adminQueueRead(pool), { acceptExceeding: true, stalenessMs: 15_000 });
    const byCode = Object.fromEntries(v2.waiting.groups.map((g) => [g.code, g]));
    expect(byCode.no_runner_matches.count).toBe(2);
    expect(byCode.no_runner_matches.satisfiable).toBe(false);
    expect(byCode.no_runner_matches.entries[0].closest).toEqual({ runner: 'build-1', gaps: ['no label gpu'] });
    expect(byCode.waiting_for_tick.count).toBe(8);
  });

  it('sends the same statements at 10 and at 100,000 ready entries, and says which figures are estimates', async () => {
    const pool = db.current.pool;
    await pool.query(`DELETE FROM queue_ready`);
    await fill(pool, 1, 10);
    const small = await countedRead(pool);
    expect(small.snapshot.lanes.every((l) => !l.estimated)).toBe(true);

    await fill(pool, 11, 100_000);
    const deep = await countedRead(pool);
    expect(deep.statements).toEqual(small.statements);
    expect(deep.statements.length).toBeLessThanOrEqual(17);
    expect(deep.statements[0]).toMatch(/REPEATABLE READ/);
    // Bulk (70,000) and interactive (20,000) pass the 5,000 bound: estimates, at least the bound.
    const lanes = deep.snapshot.lanes;
    expect(lanes[2]).toMatchObject({ estimated: true });
    expect(lanes[2].ready).toBeGreaterThanOrEqual(5_000);
    expect(lanes[1].estimated).toBe(true);
    expect(lanes[0].estimated).toBe(true);
    expect(lanes[0].ready).toBeGreaterThanOrEqual(5_000);
    expect(deep.snapshot.sample).toHaveLength(1_000);
    const v = buildAdminQueue(deep.snapshot, { acceptExceeding: true, stalenessMs: 15_000 });
    expect(v.waiting).toMatchObject({ sampled: true, sampleSize: 1_000, readyEstimated: true });

    // With statistics, the estimate is of the truth's order (ANALYZE samples, so not exact).
    await pool.query(`ANALYZE queue_ready`);
    const analysed = await queueLaneDepth(pool);
    expect(analysed.lanes[2].ready).toBeGreaterThan(20_000);
    expect(analysed.lanes[2].ready).toBeLessThan(250_000);
    const exact = await queueLaneDepth(pool, { bound: 200_000 });
    expect(exact.lanes.map((l) => [l.ready, l.estimated])).toEqual([
      [10_000, false],
      [20_000, false],
      [70_000, false],
    ]);
  });
});
