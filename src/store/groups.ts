import type { Db } from './pool.js';

export interface GroupRow {
  name: string;
  attributes: Record<string, string>;
  exclusive: boolean;
  drained: boolean;
  drainReason: string | null;
  /** Registered, undeleted runners naming this group. */
  runners: number;
}

const mapGroup = (r: any): GroupRow => ({
  name: r.name,
  attributes: r.attributes ?? {},
  exclusive: r.exclusive,
  drained: r.drained,
  drainReason: r.drain_reason,
  runners: Number(r.runners ?? 0),
});

/**
 * Creates or updates a runner group. Attributes merge into the existing ones; a key given with
 * null is removed. `exclusive` is left as it was when undefined.
 */
export async function groupSet(db: Db, p: { name: string; attributes?: Record<string, string | null>; exclusive?: boolean }): Promise<GroupRow> {
  const set = Object.fromEntries(Object.entries(p.attributes ?? {}).filter(([, v]) => v !== null));
  const remove = Object.entries(p.attributes ?? {})
    .filter(([, v]) => v === null)
    .map(([k]) => k);
  const { rows } = await db.query(
    `INSERT INTO runner_groups AS g (name, attributes, exclusive) VALUES ($1, $2::jsonb - $3::text[], coalesce($4, false))
     ON CONFLICT (name) DO UPDATE
        SET attributes = (g.attributes || $2::jsonb) - $3::text[],
            exclusive = coalesce($4, g.exclusive),
            updated_at = now()
     RETURNING *, (SELECT count(*) FROM runners r WHERE r.group_name = g.name AND r.deleted_at IS NULL) AS runners`,
    [p.name, JSON.stringify(set), remove, p.exclusive ?? null],
  );
  return mapGroup(rows[0]);
}

/** Every group with a row, plus every group named by a registered runner, in name order. */
export async function groupList(db: Db): Promise<GroupRow[]> {
  const { rows } = await db.query(
    `SELECT n.name, coalesce(g.attributes, '{}'::jsonb) AS attributes, coalesce(g.exclusive, false) AS exclusive,
            coalesce(g.drained, false) AS drained, g.drain_reason,
            (SELECT count(*) FROM runners r WHERE r.group_name = n.name AND r.deleted_at IS NULL) AS runners
       FROM (SELECT name FROM runner_groups UNION SELECT DISTINCT group_name FROM runners WHERE group_name IS NOT NULL AND deleted_at IS NULL) n
       LEFT JOIN runner_groups g ON g.name = n.name
      ORDER BY n.name`,
  );
  return rows.map(mapGroup);
}
