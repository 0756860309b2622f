import type { Db } from './pool.js';

export interface LivenessChange {
  runnerId: string;
  from: 'online' | 'watch' | 'offline';
  to: 'online' | 'watch' | 'offline';
}

/**
 * Moves runners between online, watch and offline by how long the database clock says they have
 * been silent: past one poll window (plus grace) on the watch list, past two marked offline. One
 * missed window is tolerated, two are not. Only rows whose state changes are written. Judged at
 * `now` when given (tests set the time).
 */
export async function runnerLivenessSweep(db: Db, p: { pollWindowMs: number; graceMs: number; now?: Date }): Promise<LivenessChange[]> {
  const { rows } = await db.query(
    `WITH judged AS (
       SELECT id, state AS from_state,
              CASE WHEN last_seen_at < coalesce($3::timestamptz, now()) - (2 * $1 + $2) * interval '1 millisecond' THEN 'offline'
                   WHEN last_seen_at < coalesce($3::timestamptz, now()) - ($1 + $2) * interval '1 millisecond' THEN 'watch'
                   ELSE 'online' END AS to_state
         FROM runners
        WHERE deleted_at IS NULL
     )
     UPDATE runners r SET state = j.to_state
       FROM judged j
      WHERE r.id = j.id AND j.from_state <> j.to_state
     RETURNING r.id, j.from_state, j.to_state`,
    [p.pollWindowMs, p.graceMs, p.now ?? null],
  );
  return rows.map((r) => ({ runnerId: r.id, from: r.from_state, to: r.to_state }));
}
