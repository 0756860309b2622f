import { laneOf, type Classification, type PlacementRequirement } from './entry.js';

export interface PathBinding { path: string; requirement: PlacementRequirement }

export interface ClassifyInput {
  run: { project: string; priority: number; scope: 'step' | 'run'; maxParallelSteps: number; placement: PlacementRequirement | null; target: string | null };
  step: { priority: number | null; placement: PlacementRequirement | null; pools: string[]; load: number };
  bindings: PathBinding[];
}

function isEmpty(r: PlacementRequirement | null | undefined): boolean {
  return !r || Object.keys(r).length === 0;
}

/** Whether a step's placement is left to a path binding of its run's target: neither sets one. */
export function placementFromBinding(run: Pick<ClassifyInput['run'], 'placement' | 'target'>, step: Pick<ClassifyInput['step'], 'placement'>): boolean {
  return !!run.target && isEmpty(step.placement) && isEmpty(run.placement);
}

/** The longest binding path that is the target or a `/`-separated prefix of it. */
export function bindingFor(target: string | null, bindings: PathBinding[]): PathBinding | undefined {
  if (!target) return undefined;
  let best: PathBinding | undefined;
  for (const b of bindings) {
    const p = b.path.replace(/\/+$/, '');
    if ((target === p || target.startsWith(`${p}/`)) && (!best || p.length > best.path.replace(/\/+$/, '').length)) best = b;
  }
  return best;
}

/**
 * Resolves once, at enqueue, everything dispatch needs: placement (step → run defaults →
 * longest-prefix path binding of the target), priority and lane, fair key, pools, load, run
 * scope and the site stamp (a single demanded `location`). The weight is the store's, at enqueue.
 */
export function classify(input: ClassifyInput): Classification {
  const { run, step } = input;
  const requirement = placementFromBinding(run, step)
    ? (bindingFor(run.target, input.bindings)?.requirement ?? null)
    : !isEmpty(step.placement) ? step.placement : run.placement;
  const priority = step.priority ?? run.priority;
  const location = requirement?.selectors?.location;
  return {
    priority,
    lane: laneOf(priority),
    fairKey: run.project,
    pools: [...new Set(step.pools)].sort(),
    requirement: isEmpty(requirement) ? null : requirement,
    load: step.load,
    runScope: run.scope === 'run',
    maxParallel: Math.max(1, run.maxParallelSteps),
    siteStamp: location && location.length === 1 ? location[0] : null,
  };
}
