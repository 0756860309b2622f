import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { laneOf } from '../../src/core/entry.js';
import { laneOfSql } from '../../src/store/lanes.js';
import { useTestDatabase } from '../support/db.js';

describe('the SQL copy of the lane thresholds', () => {
  const db = useTestDatabase();

  it('gives every priority the lane src/core/entry.ts gives it, the thresholds and both sides of them included', async () => {
    const { rows } = await db.current.pool.query<{ p: number; lane: number }>(
      `SELECT p, ${laneOfSql('p::smallint')} AS lane FROM generate_series(-1, 200) AS p ORDER BY p`,
    );
    expect(rows).toHaveLength(202);
    expect(rows.map((r) => r.lane)).toEqual(rows.map((r) => laneOf(r.p)));
    expect(new Set(rows.map((r) => r.lane))).toEqual(new Set([0, 1, 2]));
  });

  it('is the only copy in the store: no other statement spells the thresholds out', () => {
    const dir = new URL('../../src/store/', import.meta.url);
    const copies = readdirSync(dir)
      .filter((f) => f.endsWith('.ts') && f !== 'lanes.ts')
      .filter((f) => /priority\)?\s*>=\s*(100|50)\b/.test(readFileSync(new URL(f, dir), 'utf8')));
    expect(copies).toEqual([]);
    expect(readFileSync(new URL('admin-queue.ts', dir), 'utf8')).toContain('laneOfSql(');
  });
});
