import type { PlacementRequirement } from '../core/entry.js';
import type { Pool, PoolClient } from './pool.js';

type Db = Pool | PoolClient;

export interface BindingRow { path: string; requirement: PlacementRequirement; createdAt: Date }
const mapBinding = (r: any): BindingRow => ({ path: r.path, requirement: r.requirement, createdAt: r.created_at });

/** Binds a target path prefix to a placement requirement, replacing any earlier binding of the path. */
export async function placementBind(db: Db, p: { path: string; requirement: PlacementRequirement }): Promise<BindingRow> {
  const { rows } = await db.query(
    `INSERT INTO placement_bindings (path, requirement) VALUES ($1, $2)
     ON CONFLICT (path) DO UPDATE SET requirement = EXCLUDED.requirement
     RETURNING *`,
    [p.path, JSON.stringify(p.requirement)],
  );
  return mapBinding(rows[0]);
}

export async function placementList(db: Db): Promise<BindingRow[]> {
  const { rows } = await db.query(`SELECT * FROM placement_bindings ORDER BY path`);
  return rows.map(mapBinding);
}

/** Removes a binding; false when the path had none. */
export async function placementUnbind(db: Db, p: { path: string }): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM placement_bindings WHERE path = $1`, [p.path]);
  return (rowCount ?? 0) > 0;
}
