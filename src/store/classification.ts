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

/** A run's project and target: what its classification inputs depend on. */
export interface ClassificationScope {
  project: string;
  target: string | null;
}

/** The key of a project and target in the map classificationInputs returns. */
export const classificationKey = (s: ClassificationScope): string => JSON.stringify([s.project, s.target]);

const CLASSIFICATION_INPUTS = prepared(
  `SELECT coalesce((SELECT jsonb_agg(jsonb_build_object(
                     'project', k.project, 'target', k.target,
                     'weight', (SELECT weight FROM projects WHERE name = k.project),
                     'bindings', coalesce((SELECT jsonb_agg(jsonb_build_object('path', b.path, 'requirement', b.requirement) ORDER BY b.path)
                                             FROM placement_bindings b
                                            WHERE k.target IS NOT NULL
                                              AND (k.target = rtrim(b.path, '/') OR starts_with(k.target, rtrim(b.path, '/') || '/'))), '[]'::jsonb)))
                      FROM unnest($1::text[], $2::text[]) AS k(project, target)), '[]'::jsonb) AS inputs`,
);

/**
 * What classify needs from the store for runs of these projects and targets, in one read: each
 * project's weight and the bindings over each target, keyed by classificationKey.
 */
export async function classificationInputs(db: Pool | PoolClient, scopes: ClassificationScope[]): Promise<Map<string, ClassificationInputs>> {
  const distinct = [...new Map(scopes.map((s) => [classificationKey(s), s])).values()];
  const { rows } = await db.query(CLASSIFICATION_INPUTS([distinct.map((s) => s.project), distinct.map((s) => s.target)]));
  const inputs = new Map<string, ClassificationInputs>();
  for (const i of rows[0].inputs as Array<{ project: string; target: string | null; weight: number | string | null; bindings: Array<{ path: string; requirement: PlacementRequirement }> }>) {
    const weight = i.weight === null ? 1 : Number(i.weight);
    inputs.set(classificationKey(i), {
      projectWeight: weight > 0 ? weight : 1,
      bindings: i.bindings.map((b) => ({ path: b.path, requirement: b.requirement })),
    });
  }
  return inputs;
}
