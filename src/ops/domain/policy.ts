import type { PlacementRequirement } from '../../core/entry.js';
import { identifierProblem, oneLine } from '../../core/bounds.js';
import { requirementProblems } from '../../core/placement.js';
import { Invalid } from '../../errors.js';
import { auditRecord } from '../../store/audit.js';
import { groupList, groupSet, type GroupRow } from '../../store/groups.js';
import { placementBind, placementList, placementUnbind, type BindingRow } from '../../store/placement.js';
import { withTransaction } from '../../store/pool.js';
import { poolLimitList, poolLimitSet, poolLimitUnset, type PoolRow } from '../../store/pools.js';
import { projectList, projectSet, type ProjectRow } from '../../store/projects.js';
import type { OpsContext } from './context.js';

/**
 * A name as the run file and the registry keep it: not empty, no edge spaces, and no character a
 * terminal obeys or hides (C0, DEL, C1, bidi overrides; core/bounds.ts identifierProblem). The
 * refusal names the field and shows the value with its controls escaped, never raw.
 */
function name(what: string, value: unknown): string {
  if (typeof value !== 'string' || !value.trim() || value !== value.trim() || value.length > 200) {
    throw new Invalid(`${what} ${JSON.stringify(value)}: expected a non-empty name (at most 200 characters, no edge spaces)`);
  }
  const problem = identifierProblem(value);
  if (problem) throw new Invalid(`${what} "${oneLine(value)}": ${problem}; a name has no control characters`);
  return value;
}

/** A target path prefix as bindings store it: `acme/prod/` → `acme/prod`. */
export function normalisePath(raw: string): string {
  const path = raw.trim().replace(/\/+$/, '');
  if (!path || /\s/.test(path) || path.split('/').some((seg) => seg === '')) throw new Invalid(`path ${JSON.stringify(raw)}: expected segments separated by single slashes, like acme/prod`);
  return path;
}

/** `pools list`. */
export async function poolsList(ctx: OpsContext): Promise<{ pools: PoolRow[] }> {
  return { pools: await poolLimitList(ctx.pool) };
}

/** `pools set NAME LIMIT`: the limit and its audit row in one transaction. */
export async function poolsSet(ctx: OpsContext, p: { name: string; limit: number }): Promise<{ name: string; limit: number }> {
  const pool = name('pool name', p.name);
  if (!Number.isSafeInteger(p.limit) || p.limit < 0 || p.limit > 2_147_483_647) throw new Invalid(`limit ${p.limit}: expected a whole number ≥ 0`);
  await withTransaction(ctx.pool, async (client) => {
    await poolLimitSet(client, { name: pool, limit: p.limit });
    await auditRecord(client, { actor: ctx.actor, action: 'pools.set', target: pool, source: ctx.source, detail: { limit: p.limit } });
  });
  return { name: pool, limit: p.limit };
}

/** `pools unset NAME`: idempotent. */
export async function poolsUnset(ctx: OpsContext, p: { name: string }): Promise<{ name: string; removed: boolean }> {
  const pool = name('pool name', p.name);
  const removed = await withTransaction(ctx.pool, async (client) => {
    const removed = await poolLimitUnset(client, { name: pool });
    await auditRecord(client, { actor: ctx.actor, action: 'pools.unset', target: pool, source: ctx.source, detail: { removed } });
    return removed;
  });
  return { name: pool, removed };
}

/** `projects list`. */
export async function projectsList(ctx: OpsContext): Promise<{ projects: ProjectRow[] }> {
  return { projects: await projectList(ctx.pool) };
}

/** `projects set NAME --weight W`. */
export async function projectsSet(ctx: OpsContext, p: { name: string; weight: number }): Promise<ProjectRow> {
  const project = name('project', p.name);
  if (typeof p.weight !== 'number' || !Number.isFinite(p.weight) || p.weight <= 0 || p.weight > 1_000_000) throw new Invalid(`weight ${p.weight}: expected a number above 0`);
  return withTransaction(ctx.pool, async (client) => {
    const row = await projectSet(client, { name: project, weight: p.weight });
    await auditRecord(client, { actor: ctx.actor, action: 'projects.set', target: row.name, source: ctx.source, detail: { weight: p.weight } });
    return row;
  });
}

/** `groups list`. */
export async function groupsList(ctx: OpsContext): Promise<{ groups: GroupRow[] }> {
  return { groups: await groupList(ctx.pool) };
}

/** `groups set NAME`: attributes merge (null removes a key); `exclusive` left as it was when absent. */
export async function groupsSet(ctx: OpsContext, p: { name: string; attributes?: Record<string, string | null>; exclusive?: boolean }): Promise<GroupRow> {
  const group = name('group', p.name);
  const attributes = p.attributes ?? {};
  for (const [k, v] of Object.entries(attributes)) {
    if (!k.trim()) throw new Invalid('attribute: expected key=value with a non-empty key');
    if (v !== null && typeof v !== 'string') throw new Invalid(`attribute ${k}: expected a string value`);
  }
  return withTransaction(ctx.pool, async (client) => {
    const row = await groupSet(client, { name: group, attributes, exclusive: p.exclusive });
    await auditRecord(client, { actor: ctx.actor, action: 'groups.set', target: row.name, source: ctx.source, detail: { attributes, exclusive: p.exclusive ?? null } });
    return row;
  });
}

/** `placement list`. */
export async function placementsList(ctx: OpsContext): Promise<{ bindings: BindingRow[] }> {
  return { bindings: await placementList(ctx.pool) };
}

/** `placement bind PATH`: replaces the path's requirement. */
export async function placementsBind(ctx: OpsContext, p: { path: string; requirement: PlacementRequirement }): Promise<BindingRow> {
  const path = normalisePath(p.path);
  const requirement = p.requirement ?? {};
  if (Object.keys(requirement).length === 0) throw new Invalid('say what the path requires: --group, --selector, --label or --executor');
  const problems = requirementProblems(requirement);
  if (problems.length) throw new Invalid(problems[0]);
  return withTransaction(ctx.pool, async (client) => {
    const row = await placementBind(client, { path, requirement });
    await auditRecord(client, { actor: ctx.actor, action: 'placement.bind', target: path, source: ctx.source, detail: { requirement } });
    return row;
  });
}

/** `placement unbind PATH`: idempotent. */
export async function placementsUnbind(ctx: OpsContext, p: { path: string }): Promise<{ path: string; removed: boolean }> {
  const path = normalisePath(p.path);
  const removed = await withTransaction(ctx.pool, async (client) => {
    const removed = await placementUnbind(client, { path });
    await auditRecord(client, { actor: ctx.actor, action: 'placement.unbind', target: path, source: ctx.source, detail: { removed } });
    return removed;
  });
  return { path, removed };
}
