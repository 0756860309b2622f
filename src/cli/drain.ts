import { NotFoundError, UserError } from './errors.js';
import { DrainTargetError, fleetDrainSet, type DrainResult } from '../store/fleet.js';
import type { Pool } from '../store/pool.js';

/** The one implementation behind `fleet drain` and `fleet undrain`: validates the target, maps store errors. */
export async function drainLever(pool: Pool, p: { runner?: string; group?: string; drained: boolean; reason?: string; actor?: string }): Promise<DrainResult> {
  if ((p.runner === undefined) === (p.group === undefined)) throw new UserError('name one target: a RUNNER (id or name) or --group G');
  if (p.group !== undefined && !p.group.trim()) throw new UserError('--group: expected a group name');
  try {
    return await fleetDrainSet(pool, { runner: p.runner, group: p.group, drained: p.drained, reason: p.reason ?? null, actor: p.actor ?? 'cli' });
  } catch (err) {
    if (err instanceof DrainTargetError) throw err.code === 'not_found' ? new NotFoundError(err.message) : new UserError(err.message, 'ambiguous');
    throw err;
  }
}

export function describeDrain(r: DrainResult): string {
  const what = r.kind === 'group' ? `group ${r.targets[0]}` : `runner ${r.targets[0]}`;
  if (!r.changed) return `${what} already ${r.drained ? 'drained' : 'undrained'}`;
  return r.drained ? `${what} drained: its polls are answered empty, its running work continues` : `${what} undrained`;
}
