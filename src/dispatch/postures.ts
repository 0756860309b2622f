import { auditRecord } from '../store/audit.js';
import { withTransaction, type Pool } from '../store/pool.js';
import { postureSet, type FleetPosture, type PostureField } from '../store/posture.js';

export interface PostureLeverResult {
  posture: { quiesced: boolean; halted: boolean; reason: string | null; actor: string | null; since: string };
  changed: boolean;
}

const ACTIONS: Record<PostureField, [string, string]> = {
  quiesced: ['server.quiesce', 'server.resume'],
  halted: ['platform.halt', 'platform.resume'],
};

/**
 * Pulls a fleet-wide posture lever: fleet quiesce (no offers; work in flight continues) or
 * platform halt (no offers, expiry sweep held). One durable row every replica reads each tick;
 * the change and its audit row commit together.
 */
export async function fleetPostureLever(pool: Pool, p: { field: PostureField; value: boolean; reason?: string; actor: string; source?: string }): Promise<PostureLeverResult> {
  return withTransaction(pool, async (client) => {
    const { changed, posture } = await postureSet(client, { field: p.field, value: p.value, reason: p.reason ?? null, actor: p.actor });
    if (changed) {
      await auditRecord(client, { actor: p.actor, action: ACTIONS[p.field][p.value ? 0 : 1], target: 'fleet', source: p.source, detail: { reason: p.reason ?? null } });
    }
    return { changed, posture: postureJson(posture) };
  });
}

export function postureJson(p: FleetPosture): PostureLeverResult['posture'] {
  return { quiesced: p.quiesced, halted: p.halted, reason: p.reason, actor: p.actor, since: p.since.toISOString() };
}
