import type { PathBinding } from '../core/classify.js';
import type { PlacementRequirement } from '../core/entry.js';
import type { Pool, PoolClient } from './pool.js';
import { prepared } from './prepared.js';

export interface ClassificationInputs {
  /** The project's fair-share weight; 1 when the project has no row. */
  projectWeight: number;
  /** Placement bindings whose path is the target or a prefix of it (classify picks the longest). */
  bindings: PathBinding[];
}

const CLASSIFICATION_INPUTS = prepared(
  `SELECT ARRAY(SELECT nextval(pg_get_serial_sequence('runs', 'id')) FROM generate_series(1, $3)) AS run_ids,
            (SELECT weight FROM projects WHERE name = $1) AS weight,
            coalesce((SELECT jsonb_agg(jsonb_build_object('path', b.path, 'requirement', b.requirement) ORDER BY b.path)
                        FROM placement_bindings b
                       WHERE $2::text IS NOT NULL
                         AND ($2 = rtrim(b.path, '/') OR starts_with($2, rtrim(b.path, '/') || '/'))), '[]'::jsonb) AS bindings`,
);

/**
 * What classify needs from the store for one run: its project's weight and the bindings over its
 * target. With `runIds`, the same read also takes that many run ids (a submit's one read).
 */
export async function classificationInputs(db: Pool | PoolClient, p: { project: string; target: string | null; runIds?: number }): Promise<ClassificationInputs & { runIds: number[] }> {
  const { rows } = await db.query(CLASSIFICATION_INPUTS([p.project, p.target, p.runIds ?? 0]));
  const weight = rows[0].weight === null ? 1 : Number(rows[0].weight);
  return {
    runIds: (rows[0].run_ids as Array<string | number>).map(Number),
    projectWeight: weight > 0 ? weight : 1,
    bindings: (rows[0].bindings as Array<{ path: string; requirement: PlacementRequirement }>).map((b) => ({ path: b.path, requirement: b.requirement })),
  };
}
