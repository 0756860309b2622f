import { POSTURE_VERBS, type PostureVerb } from '../../core/postures.js';
import { adminStatusRead, type AdminStatus } from './status.js';
import { parseUntil, postureLever, type PostureLeverResult } from './postures.js';
import { Invalid, NotFound } from '../../errors.js';
import { auditRecord } from '../../store/audit.js';
import { coordinationNotify } from '../../store/coordination.js';
import { withTransaction, type Pool } from '../../store/pool.js';
import { replicaSetQuiesced } from '../../store/replicas.js';
import type { OpsContext } from './context.js';

export interface PostureInput { reason?: string; until?: string }

/** A posture verb from its row of POSTURE_VERBS: durable, idempotent, audited. */
const posture = (verb: PostureVerb) => (ctx: OpsContext, p: PostureInput): Promise<PostureLeverResult> => {
  const { fields, value } = POSTURE_VERBS[verb];
  return postureLever(ctx.pool, { fields: [...fields], value, reason: p.reason, until: p.until === undefined ? undefined : parseUntil(p.until), actor: ctx.actor, source: ctx.source });
};

/** `fleet quiesce|resume`: no new offers fleet-wide. */
export const fleetQuiesce = posture('fleetQuiesce');
export const fleetResume = posture('fleetResume');
/** `admin platform halt`: no dispatch and the expiry sweep held. */
export const platformHalt = posture('platformHalt');
/** `admin platform quiesce`: no new offers, the expiry sweep keeps running. */
export const platformQuiesce = posture('platformQuiesce');
/** `admin platform resume`: lifts a halt and a system quiesce. */
export const platformResume = posture('platformResume');

export type { PostureVerb };

export interface ReplicaLeverResult {
  id: string;
  quiesced: boolean;
  /** False when the replica was already in the asked state (the verb is idempotent). */
  changed: boolean;
}

/**
 * `admin replica quiesce|resume`: the replica leaves (or rejoins) the membership on its next
 * coordination tick: its shards move, it gives up the leader lease, its parked polls are answered
 * empty, and it keeps serving HTTP. Audited in the same transaction. Undefined: no such replica.
 */
export async function replicaQuiesceSet(pool: Pool, p: { id: string; quiesced: boolean; actor: string; source?: string }): Promise<ReplicaLeverResult | undefined> {
  return withTransaction(pool, async (client) => {
    const res = await replicaSetQuiesced(client, { id: p.id, quiesced: p.quiesced });
    if (!res) return undefined;
    await auditRecord(client, {
      actor: p.actor,
      action: p.quiesced ? 'replica.quiesce' : 'replica.resume',
      target: p.id,
      source: p.source,
      detail: { changed: res.changed },
    });
    // Delivered on commit: the replica leaves (or rejoins) on the tick this wakes.
    if (res.changed) await coordinationNotify(client, { from: p.actor });
    return { id: p.id, quiesced: p.quiesced, changed: res.changed };
  });
}

const replica = (quiesced: boolean) => async (ctx: OpsContext, p: { id: string }): Promise<ReplicaLeverResult> => {
  if (typeof p.id !== 'string' || !p.id.trim()) throw new Invalid('replica id: expected an id (see opschain admin status)');
  const result = await replicaQuiesceSet(ctx.pool, { id: p.id, quiesced, actor: ctx.actor, source: ctx.source });
  if (!result) throw new NotFound(`no replica with id ${p.id}`);
  return result;
};

/** `admin replica quiesce|resume`. */
export const replicaQuiesce = replica(true);
export const replicaResume = replica(false);

/** `admin status`. */
export async function adminStatus(ctx: OpsContext): Promise<AdminStatus> {
  return adminStatusRead(ctx.pool);
}
