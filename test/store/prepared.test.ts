import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/store/pool.js';
import { prepared } from '../../src/store/prepared.js';
import { useTestDatabase } from '../support/db.js';

const READ = prepared(`SELECT * FROM prepared_probe ORDER BY id`);

describe('named prepared statements', () => {
  const db = useTestDatabase();

  it('are parsed once per connection and reused by name', async () => {
    const pool = createPool(db.current.url, { max: 1, preparedStatements: true });
    try {
      await pool.query(`CREATE TABLE prepared_probe (id int PRIMARY KEY)`);
      await pool.query(`INSERT INTO prepared_probe VALUES (1), (2)`);
      for (let i = 0; i < 3; i++) expect((await pool.query(READ([]))).rows).toEqual([{ id: 1 }, { id: 2 }]);
      const { rows } = await pool.query(`SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'opschain_%'`);
      expect(rows).toHaveLength(1);
      expect(rows[0].statement).toBe(`SELECT * FROM prepared_probe ORDER BY id`);
    } finally {
      await pool.end();
    }
  });

  it('go unnamed from a pool that does not prepare them (a CLI, or behind a transaction pooler)', async () => {
    const pool = createPool(db.current.url, { max: 1 });
    try {
      for (let i = 0; i < 3; i++) expect((await pool.query(READ([]))).rows).toEqual([{ id: 1 }, { id: 2 }]);
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM pg_prepared_statements`);
      expect(rows[0].n).toBe(0);
    } finally {
      await pool.end();
    }
  });

  it('a migration that adds a column costs one failed execution per pool, then its connections prepare the statement afresh', async () => {
    const pool = createPool(db.current.url, { max: 2, preparedStatements: true });
    try {
      await pool.query(`DROP TABLE IF EXISTS prepared_probe`);
      await pool.query(`CREATE TABLE prepared_probe (id int PRIMARY KEY)`);
      await pool.query(`INSERT INTO prepared_probe VALUES (1)`);
      // Both connections prepare the statement.
      const [c1, c2] = [await pool.connect(), await pool.connect()];
      try {
        expect((await c1.query(READ([]))).rows).toEqual([{ id: 1 }]);
        expect((await c2.query(READ([]))).rows).toEqual([{ id: 1 }]);
        // Another connection migrates under the running one, as a rolling upgrade does.
        const other = createPool(db.current.url, { max: 1 });
        await other.query(`ALTER TABLE prepared_probe ADD COLUMN note text NOT NULL DEFAULT 'new'`);
        await other.end();
        // The first execution after it fails (inside a transaction: that transaction is lost, as
        // a deadlock victim's would be); after it, no connection of the pool fails.
        await c1.query('BEGIN');
        await expect(c1.query(READ([]))).rejects.toMatchObject({ code: '0A000' });
        await c1.query('ROLLBACK');
        expect((await c2.query(READ([]))).rows).toEqual([{ id: 1, note: 'new' }]);
        expect((await c1.query(READ([]))).rows).toEqual([{ id: 1, note: 'new' }]);
      } finally {
        c1.release();
        c2.release();
      }
    } finally {
      await pool.end();
    }
  });
});
