import type { PathBinding } from '../core/classify.js';
import type { PlacementRequirement } from '../core/entry.js';
import type { Db } from './pool.js';
import { prepared } from './prepared.js';

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

const BINDINGS_OVER = prepared(
  `SELECT t.target, b.path, b.requirement
     FROM unnest($1::text[]) AS t(target)
     JOIN placement_bindings b ON t.target = rtrim(b.path, '/') OR starts_with(t.target, rtrim(b.path, '/') || '/')
    ORDER BY t.target, b.path`,
);

/**
 * The bindings whose path is each target or a prefix of it, in one read, by target (classify
 * picks the longest). A target no binding covers maps to an empty list.
 */
export async function placementBindingsOver(db: Db, targets: string[]): Promise<Map<string, PathBinding[]>> {
  const distinct = [...new Set(targets)];
  const over = new Map<string, PathBinding[]>(distinct.map((t) => [t, []]));
  if (distinct.length === 0) return over;
  const { rows } = await db.query(BINDINGS_OVER([distinct]));
  for (const r of rows) over.get(r.target)!.push({ path: r.path, requirement: r.requirement });
  return over;
}
