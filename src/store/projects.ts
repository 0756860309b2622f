import type { Db } from './pool.js';

export interface ProjectRow { name: string; weight: number }

/** Sets a project's fair-share weight (default 1 for projects never set). Idempotent. */
export async function projectSet(db: Db, p: { name: string; weight: number }): Promise<ProjectRow> {
  const { rows } = await db.query(
    `INSERT INTO projects (name, weight) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET weight = EXCLUDED.weight
     RETURNING name, weight`,
    [p.name, p.weight],
  );
  return { name: rows[0].name, weight: Number(rows[0].weight) };
}

export async function projectList(db: Db): Promise<ProjectRow[]> {
  const { rows } = await db.query(`SELECT name, weight FROM projects ORDER BY name`);
  return rows.map((r) => ({ name: r.name, weight: Number(r.weight) }));
}
