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

  it('a migration that adds a column costs one failed execution per connection, then the statement is prepared afresh', async () => {
    const pool = createPool(db.current.url, { max: 1, preparedStatements: true });
    try {
      await pool.query(`DROP TABLE IF EXISTS prepared_probe`);
      await pool.query(`CREATE TABLE prepared_probe (id int PRIMARY KEY)`);
      await pool.query(`INSERT INTO prepared_probe VALUES (1)`);
      expect((await pool.query(READ([]))).rows).toEqual([{ id: 1 }]);
      // Another connection migrates under the running one, as a rolling upgrade does.
      const other = createPool(db.current.url, { max: 1 });
      await other.query(`ALTER TABLE prepared_probe ADD COLUMN note text NOT NULL DEFAULT 'new'`);
      await other.end();
      await expect(pool.query(READ([]))).rejects.toMatchObject({ code: '0A000' });
      expect((await pool.query(READ([]))).rows).toEqual([{ id: 1, note: 'new' }]);
      // Inside a transaction as well: the next transaction on the same connection works.
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        expect((await client.query(READ([]))).rows).toEqual([{ id: 1, note: 'new' }]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
    }
  });
});
