import { Conflict, Invalid, NotFound } from '../../errors.js';
import { auditRecord } from '../../store/audit.js';
import { withTransaction } from '../../store/pool.js';
import { runnerFind, runnersRemove } from '../../store/runners.js';
import { drainOutstanding, drainPreview, type DrainPreview, type DrainTargetJson, type OutstandingLease } from './drain.js';
import { fleetDrainSet, fleetQueueRead, type DrainResult } from '../../store/fleet.js';
import { buildFleetQueue, type FleetQueueView } from '../../views/fleet-queue.js';
import type { OpsContext } from './context.js';

export interface DrainInput { runner?: string; group?: string; reason?: string }

function drainTarget(p: DrainInput): void {
  if ((p.runner === undefined) === (p.group === undefined)) throw new Invalid('name one target: a RUNNER (id or name) or --group G');
  if (p.group !== undefined && !p.group.trim()) throw new Invalid('--group: expected a group name');
  if (p.runner !== undefined && !p.runner.trim()) throw new Invalid('RUNNER: expected a runner id or name');
}

/** `fleet drain`: idempotent, audited in the same transaction; an unknown runner or group is NotFound. */
export async function fleetDrain(ctx: OpsContext, p: DrainInput): Promise<DrainResult> {
  drainTarget(p);
  return fleetDrainSet(ctx.pool, { runner: p.runner, group: p.group, drained: true, reason: p.reason ?? null, actor: ctx.actor, source: ctx.source });
}

/** `fleet undrain`. */
export async function fleetUndrain(ctx: OpsContext, p: DrainInput): Promise<DrainResult> {
  drainTarget(p);
  return fleetDrainSet(ctx.pool, { runner: p.runner, group: p.group, drained: false, reason: p.reason ?? null, actor: ctx.actor, source: ctx.source });
}

/** `fleet queue`: every entry with its placement verdict. */
export async function fleetQueue(ctx: OpsContext, p: { limit?: number; acceptExceeding?: boolean }): Promise<FleetQueueView> {
  const limit = p.limit ?? 1000;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 99_999) throw new Invalid(`limit ${limit}: expected 1 to 99999`);
  const snapshot = await fleetQueueRead(ctx.pool, { limit });
  return buildFleetQueue(snapshot, { acceptExceeding: p.acceptExceeding ?? ctx.acceptExceeding ?? true });
}

/** `fleet drain --dry-run`: what a drain would hold, changing nothing. */
export async function fleetDrainPreview(ctx: OpsContext, p: { runner?: string; group?: string }): Promise<DrainPreview> {
  drainTarget(p);
  return drainPreview(ctx.pool, { runner: p.runner, group: p.group });
}

/** The leases still out on a drain target's runners: what `fleet drain --wait` polls until it is empty. */
export async function fleetDrainOutstanding(ctx: OpsContext, p: { runner?: string; group?: string }): Promise<{ target: DrainTargetJson; leases: OutstandingLease[] }> {
  drainTarget(p);
  return drainOutstanding(ctx.pool, { runner: p.runner, group: p.group });
}

/**
 * `fleet runners remove RUNNER`: the runner leaves the registry and its credential is refused
 * (`credential invalid`) on its next call to any replica; audited in the same transaction. Its
 * leases still out end by the expiry sweep. Removing it again is NotFound: it is gone.
 */
export async function fleetRunnersRemove(ctx: OpsContext, p: { runner: string; reason?: string }): Promise<{ removed: Array<{ id: string; name: string }> }> {
  if (typeof p.runner !== 'string' || !p.runner.trim()) throw new Invalid('RUNNER: expected a runner id or name');
  return withTransaction(ctx.pool, async (client) => {
    const found = await runnerFind(client, p.runner);
    if (found.length === 0) throw new NotFound(`no runner with id or name ${p.runner}`);
    if (found.length > 1) throw new Conflict(`${found.length} runners are named ${p.runner}: give the runner id (${found.map((r) => r.id).join(', ')})`, 'ambiguous');
    const removed = await runnersRemove(client, { ids: [found[0].id] });
    await auditRecord(client, { actor: ctx.actor, action: 'runner.remove', target: found[0].id, source: ctx.source, detail: { name: found[0].name, reason: p.reason ?? null } });
    return { removed };
  });
}
