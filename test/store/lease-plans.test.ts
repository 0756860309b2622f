import { describe, expect, it } from 'vitest';
import { leaseAck, leaseComplete, leaseRenew, leaseTableVacuum } from '../../src/store/leases.js';
import { useTestDatabase } from '../support/db.js';
import { genericPlan, type PlanNode } from '../support/plans.js';

describe('the lease writes reach their leases by primary key on a churned, vacuumed table', () => {
  const db = useTestDatabase();

  it('ack, renew and the lease end read the held leases in one scan of the key, never through the runner index or item by item', async () => {
    const pool = db.current.pool;
    // Eight runners, 20,000 leases delivered and all but 256 ended, then the table vacuumed and
    // analysed as the replica does it: its statistics now show few leases and many per runner.
    await pool.query(
      `INSERT INTO step_leases (step_id, run_id, shard, attempt, ready_at, position, holder, runner_id, expires_at)
       SELECT g, g / 10, 0, 1, now(), g, 'test', 'rnr_' || (g % 8), now() + interval '1 hour' FROM generate_series(1, 20000) g`,
    );
    await pool.query(`DELETE FROM step_leases WHERE step_id <= 19744`);
    await leaseTableVacuum(pool);
    const { rows } = await pool.query(`SELECT step_id::int, token::text, runner_id FROM step_leases ORDER BY step_id LIMIT 160`);
    const items = rows.map((r) => ({ stepId: r.step_id as number, token: r.token as string, runnerId: r.runner_id as string }));

    const client = await pool.connect();
    try {
      const plans: Record<string, PlanNode[]> = {
        ack: await genericPlan(client, (c) => leaseAck(c, { ttlMs: 60_000, items })),
        renew: await genericPlan(client, (c) => leaseRenew(c, { ttlMs: 60_000, items })),
        end: await genericPlan(client, (c) => leaseComplete(c, { items })),
      };
      for (const [name, nodes] of Object.entries(plans)) {
        const onLeases = nodes.filter((n) => n['Relation Name'] === 'step_leases' && n['Node Type'] !== 'ModifyTable');
        expect({ name, reads: onLeases.map((n) => [n['Node Type'], n['Index Name'], n['Actual Loops']]) }).toEqual({
          name,
          reads: [['Index Scan', 'step_leases_pkey', 1]],
        });
      }
    } finally {
      client.release();
    }
  });
});
