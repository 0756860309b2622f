import { describe, expect, it } from 'vitest';
import { migrate, migrationFiles, migrationStatus } from '../../src/store/migrate.js';
import { createPool } from '../../src/store/pool.js';
import { useTestDatabase } from '../support/db.js';

describe('migrations', () => {
  const db = useTestDatabase({ migrated: false });

  it('three concurrent migrators apply each migration exactly once', async () => {
    const pools = [1, 2, 3].map(() => createPool(db.current.url, { max: 1 }));
    try {
      const results = await Promise.all(pools.map((p) => migrate(p)));
      const files = migrationFiles();
      expect(results.map((r) => r.length).sort()).toEqual([0, 0, files.length]);
      const { rows } = await db.current.pool.query('SELECT id, count(*)::int AS n FROM opschain_migrations GROUP BY id ORDER BY id');
      expect(rows).toEqual(files.map((f) => ({ id: f.id, n: 1 })));
      const status = await migrationStatus(db.current.pool);
      expect(status.every((s) => s.applied)).toBe(true);
      const { rows: tables } = await db.current.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = ANY($1)`, [
        ['replicas', 'coordination_leases', 'fleet_posture', 'audit_log', 'queue_ready', 'step_leases'],
      ]);
      expect(tables[0].n).toBe(6);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('is a no-op once applied', async () => {
    expect(await migrate(db.current.pool)).toEqual([]);
  });
});
