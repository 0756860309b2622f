import { POSTURE_ACTIONS } from '../core/postures.js';
import { auditRecord } from '../store/audit.js';
import { withTransaction, type Pool } from '../store/pool.js';
import { posturesDueToLift, postureSet, type FleetPosture, type PostureField, type PostureInForce } from '../store/posture.js';

/** The posture that stops every offer now, the most severe first; null when offers flow. */
export function offersStoppedBy(p: Pick<FleetPosture, 'halted' | 'systemQuiesced' | 'fleetQuiesced'>): PostureField | null {
  return p.halted ? 'halted' : p.systemQuiesced ? 'system_quiesced' : p.fleetQuiesced ? 'quiesced' : null;
}

/**
 * The leader's pass: lifts every posture whose --until has passed (by the database clock, or at
 * `now` when given: tests set the time), each audited as its resume with the leader as actor and
 * who pulled it in the detail. Returns what it lifted.
 */
export async function postureExpireOnce(pool: Pool, p: { actor: string; now?: Date }): Promise<PostureInForce[]> {
  return withTransaction(pool, async (client) => {
    const due = await posturesDueToLift(client, { now: p.now });
    for (const h of due) {
      const r = await postureSet(client, { field: h.posture, value: false, reason: `until ${h.until!.toISOString()} passed`, actor: p.actor });
      if (!r.changed) continue;
      const action = POSTURE_ACTIONS[h.posture];
      await auditRecord(client, {
        actor: p.actor,
        action: action.off,
        target: action.target,
        source: 'until',
        detail: { posture: h.posture, reason: `--until ${h.until!.toISOString()} passed`, expired: true, until: h.until!.toISOString(), held_by: h.actor, held_reason: h.reason, held_since: h.since.toISOString() },
      });
    }
    return due;
  });
}

/** The leader pass lifting expired postures, as the coordination loop runs it on the leader's tick. */
export const postureExpiryPass = (ctx: { pool: Pool; replicaId: string }, opts: { now?: Date } = {}) => postureExpireOnce(ctx.pool, { actor: `leader:${ctx.replicaId}`, now: opts.now });
