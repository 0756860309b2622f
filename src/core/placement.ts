import type { PlacementRequirement, RunnerPosture } from './entry.js';

export type { RunnerPosture } from './entry.js';

/** The operator drains in force, read once per dispatch tick. */
export interface DrainState {
  runners: ReadonlySet<string>;
  groups: ReadonlySet<string>;
}

export const NO_DRAINS: DrainState = { runners: new Set(), groups: new Set() };

export function groupsOf(req: PlacementRequirement | null | undefined): string[] | null {
  if (!req || req.group === undefined) return null;
  return Array.isArray(req.group) ? req.group : [req.group];
}

/** True when the requirement names the runner's group (the only work an exclusive group takes). */
export function targetsGroup(req: PlacementRequirement | null | undefined, group: string | null): boolean {
  const groups = groupsOf(req);
  return group !== null && groups !== null && groups.includes(group);
}

/**
 * Why the runner cannot take work with this requirement, as short phrases (`not in group build`,
 * `no label linux`, `location not in dc1|dc2`); empty when it matches.
 * Drain is not placement: see isDrained.
 */
export function placementGaps(req: PlacementRequirement | null | undefined, r: RunnerPosture): string[] {
  const gaps: string[] = [];
  const groups = groupsOf(req);
  if (groups !== null && (r.group === null || !groups.includes(r.group))) gaps.push(`not in group ${groups.join('|')}`);
  for (const [key, allowed] of Object.entries(req?.selectors ?? {})) {
    const have = r.groupAttributes[key];
    if (have === undefined || !allowed.includes(have)) gaps.push(`${key} not in ${allowed.join('|')}`);
  }
  for (const label of req?.labels ?? []) if (!r.labels.includes(label)) gaps.push(`no label ${label}`);
  for (const executor of req?.executors ?? []) if (!r.executors.includes(executor)) gaps.push(`no executor ${executor}`);
  if (r.exclusive && r.group !== null && !targetsGroup(req, r.group)) gaps.push(`exclusive group ${r.group} takes only work targeted at it`);
  return gaps;
}

/**
 * Group equality or set membership, every selector resolving to an in-set group attribute, every
 * label and executor present, and an exclusive group's runner only for work naming its group.
 */
export function placementMatches(req: PlacementRequirement | null | undefined, r: RunnerPosture): boolean {
  return placementGaps(req, r).length === 0;
}

export function isDrained(r: RunnerPosture & { drained?: boolean }, drains: DrainState = NO_DRAINS): boolean {
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
