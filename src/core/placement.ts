import type { PlacementRequirement, RunnerPlacement } from './entry.js';

export type { RunnerPlacement } from './entry.js';

/** The operator drains in force, read once per dispatch tick. */
export interface DrainState {
  runners: ReadonlySet<string>;
  groups: ReadonlySet<string>;
}

export const NO_DRAINS: DrainState = { runners: new Set(), groups: new Set() };

/** The labels or executors of a requirement that names none. */
const NONE: readonly string[] = [];

/** Whether `group` is among the requirement's groups (a name or a set of names). */
const namesGroup = (groups: string | string[], group: string): boolean => (Array.isArray(groups) ? groups.includes(group) : groups === group);

/**
 * The placement rule, once: group equality or set membership, every selector resolving to an
 * in-set group attribute, every label and executor present, and an exclusive group's runner only
 * for work naming its group. With `gaps` it collects every way the runner falls short, as short
 * phrases; without, it stops at the first. A tick checks each claim against every parked runner
 * (256 claims over 1,000 runners is 256,000 checks), so the check alone builds no phrase and no
 * array: the phrases are for the views that explain a verdict.
 */
function placementCheck(req: PlacementRequirement | null | undefined, r: RunnerPlacement, gaps: string[] | null): boolean {
  let matches = true;
  const groups = req?.group;
  if (groups !== undefined && (r.group === null || !namesGroup(groups, r.group))) {
    if (!gaps) return false;
    matches = false;
    gaps.push(`not in group ${Array.isArray(groups) ? groups.join('|') : groups}`);
  }
  const selectors = req?.selectors;
  if (selectors) {
    for (const key in selectors) {
      const allowed = selectors[key];
      const have = r.groupAttributes[key];
      if (have !== undefined && allowed.includes(have)) continue;
      if (!gaps) return false;
      matches = false;
      gaps.push(`${key} not in ${allowed.join('|')}`);
    }
  }
  for (const label of req?.labels ?? NONE) {
    if (r.labels.includes(label)) continue;
    if (!gaps) return false;
    matches = false;
    gaps.push(`no label ${label}`);
  }
  for (const executor of req?.executors ?? NONE) {
    if (r.executors.includes(executor)) continue;
    if (!gaps) return false;
    matches = false;
    gaps.push(`no executor ${executor}`);
  }
  // An exclusive group takes only work that names it.
  if (r.exclusive && r.group !== null && (groups === undefined || !namesGroup(groups, r.group))) {
    if (!gaps) return false;
    matches = false;
    gaps.push(`exclusive group ${r.group} takes only work targeted at it`);
  }
  return matches;
}

/**
 * Why the runner cannot take work with this requirement, as short phrases (`not in group build`,
 * `no label linux`, `location not in dc1|dc2`); empty when it matches.
 * Drain is not placement: see isDrained.
 */
export function placementGaps(req: PlacementRequirement | null | undefined, r: RunnerPlacement): string[] {
  const gaps: string[] = [];
  placementCheck(req, r, gaps);
  return gaps;
}

/** Whether the runner can take work with this requirement: placementGaps would be empty. */
export function placementMatches(req: PlacementRequirement | null | undefined, r: RunnerPlacement): boolean {
  return placementCheck(req, r, null);
}

export function isDrained(r: RunnerPlacement & { drained?: boolean }, drains: DrainState = NO_DRAINS): boolean {
  return r.drained === true || drains.runners.has(r.runnerId) || (r.group !== null && drains.groups.has(r.group));
}

/** Write-time validation of a requirement: what is wrong with it, empty when it is well formed. */
export function requirementProblems(req: PlacementRequirement): string[] {
  const problems: string[] = [];
  const nonEmpty = (s: unknown) => typeof s === 'string' && s.trim() !== '' && s === s.trim();
  if (req.group !== undefined) {
    const groups = Array.isArray(req.group) ? req.group : [req.group];
    if (groups.length === 0) problems.push('group: an empty set matches no runner');
    for (const g of groups) if (!nonEmpty(g)) problems.push(`group: ${JSON.stringify(g)} is not a group name`);
  }
  for (const [key, values] of Object.entries(req.selectors ?? {})) {
    if (!nonEmpty(key)) problems.push(`selectors: ${JSON.stringify(key)} is not an attribute name`);
    if (!Array.isArray(values) || values.length === 0) problems.push(`selectors.${key}: an empty set matches no group`);
    else for (const v of values) if (!nonEmpty(v)) problems.push(`selectors.${key}: ${JSON.stringify(v)} is not a value`);
  }
  for (const l of req.labels ?? []) if (!nonEmpty(l)) problems.push(`labels: ${JSON.stringify(l)} is not a label`);
  for (const x of req.executors ?? []) if (!nonEmpty(x)) problems.push(`executors: ${JSON.stringify(x)} is not an executor`);
  return problems;
}
