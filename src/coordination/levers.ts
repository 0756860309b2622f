import { auditRecord } from '../store/audit.js';
import { coordinationNotify } from '../store/coordination.js';
import { withTransaction, type Pool } from '../store/pool.js';
import { replicaSetQuiesced } from '../store/replicas.js';

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
