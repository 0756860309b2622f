import type { Pool, PoolClient } from './pool.js';
import { postureHoldsRead, postureRead, type FleetPosture, type PostureField, type PostureHold } from './posture.js';

// The posture as levers, status and the API report it. It lives beside the posture rows, below
// both the dispatch plane (levers) and coordination (admin status), so neither imports the other.

export interface PostureHoldJson { posture: PostureField; reason: string | null; actor: string; since: string; until: string | null }

export interface PostureJson {
  quiesced: boolean;
  halted: boolean;
  systemQuiesced: boolean;
  reason: string | null;
  actor: string | null;
  since: string;
  /** Each posture in force with who pulled it, why and until when. */
  holds: PostureHoldJson[];
}

/** The posture flags and every hold in force, as levers, status and the API report them. */
export async function postureStatus(db: Pool | PoolClient): Promise<PostureJson> {
  return postureJson(db, await postureRead(db));
}

export async function postureJson(db: Pool | PoolClient, p: FleetPosture): Promise<PostureJson> {
  const holds = await postureHoldsRead(db);
  return {
    quiesced: p.quiesced,
    halted: p.halted,
    systemQuiesced: p.systemQuiesced,
    reason: p.reason,
    actor: p.actor,
    since: p.since.toISOString(),
    holds: holds.map(holdJson),
  };
}

export const holdJson = (h: PostureHold): PostureHoldJson => ({ posture: h.posture, reason: h.reason, actor: h.actor, since: h.since.toISOString(), until: h.until?.toISOString() ?? null });
