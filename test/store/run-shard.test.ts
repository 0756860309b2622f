import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { shardOf } from '../../src/core/fnv.js';
import { useTestDatabase } from '../support/db.js';

describe('run_shard, the SQL twin of shardOf', () => {
  const db = useTestDatabase();

  it('gives every run id the shard shardOf gives it', async () => {
    const pool = db.current.pool;
    // Every id up to 20,000 (all digit counts to five, every last digit) in one statement.
    const { rows } = await pool.query(`SELECT array_agg(run_shard(g) ORDER BY g) AS shards FROM generate_series(1, 20000) g`);
    expect(rows[0].shards).toEqual(Array.from({ length: 20000 }, (_, i) => shardOf(i + 1)));
    // And ids of any size a run can have (a bigint sequence, read as a safe JS number).
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), { minLength: 1, maxLength: 200 }), async (ids) => {
        const { rows: r } = await pool.query(`SELECT array_agg(run_shard(id) ORDER BY o) AS shards FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, o)`, [ids]);
        expect(r[0].shards).toEqual(ids.map((id) => shardOf(id)));
      }),
      { numRuns: 50 },
    );
  });
});
