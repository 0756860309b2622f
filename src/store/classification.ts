import type { PathBinding } from '../core/classify.js';
import type { PlacementRequirement } from '../core/entry.js';
import type { Pool, PoolClient } from './pool.js';

export interface ClassificationInputs {
  /** The project's fair-share weight; 1 when the project has no row. */
  projectWeight: number;
  /** Placement bindings whose path is the target or a prefix of it (classify picks the longest). */
  bindings: PathBinding[];
}

/** What classify needs from the store for one run: its project's weight and the bindings over its target. */
export async function classificationInputs(db: Pool | PoolClient, p: { project: string; target: string | null }): Promise<ClassificationInputs> {
  const { rows } = await db.query(
    `SELECT (SELECT weight FROM projects WHERE name = $1) AS weight,
            coalesce((SELECT jsonb_agg(jsonb_build_object('path', b.path, 'requirement', b.requirement) ORDER BY b.path)
                        FROM placement_bindings b
                       WHERE $2::text IS NOT NULL
                         AND ($2 = rtrim(b.path, '/') OR starts_with($2, rtrim(b.path, '/') || '/'))), '[]'::jsonb) AS bindings`,
    [p.project, p.target],
  );
  const weight = rows[0].weight === null ? 1 : Number(rows[0].weight);
  return {
    projectWeight: weight > 0 ? weight : 1,
    bindings: (rows[0].bindings as Array<{ path: string; requirement: PlacementRequirement }>).map((b) => ({ path: b.path, requirement: b.requirement })),
  };
}
