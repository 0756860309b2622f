import type { Pool, Db } from './pool.js';

export interface ReplicaRow {
  id: string;
  host: string;
  site: string | null;
  version: string;
  httpAddress: string | null;
  startedAt: Date;
  heartbeatAt: Date;
  heartbeatAgeMs: number;
  quiesced: boolean;
  stoppedAt: Date | null;
}

const mapReplica = (r: any): ReplicaRow => ({
  id: r.id,
  host: r.host,
  site: r.site,
  version: r.version,
  httpAddress: r.http_address,
  startedAt: r.started_at,
  heartbeatAt: r.heartbeat_at,
  heartbeatAgeMs: Number(r.heartbeat_age_ms),
  quiesced: r.quiesced,
  stoppedAt: r.stopped_at,
});

export async function replicaRegister(pool: Pool, p: { id: string; host: string; site?: string; version: string; httpAddress?: string }): Promise<void> {
  await pool.query(
    `INSERT INTO replicas (id, host, site, version, http_address) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), http_address = EXCLUDED.http_address, stopped_at = NULL`,
    [p.id, p.host, p.site ?? null, p.version, p.httpAddress ?? null],
  );
}

/**
 * Refreshes this replica's heartbeat, to `now` when given (tests set the time), else the database
 * clock; returns whether it is quiesced, or undefined when its row is gone or stopped.
 */
export async function replicaHeartbeat(pool: Pool, id: string, p: { now?: Date } = {}): Promise<{ quiesced: boolean } | undefined> {
  const { rows } = await pool.query(`UPDATE replicas SET heartbeat_at = coalesce($2::timestamptz, now()) WHERE id = $1 AND stopped_at IS NULL RETURNING quiesced`, [id, p.now ?? null]);
  return rows[0] ? { quiesced: rows[0].quiesced } : undefined;
}

/** Takes a replica out of (or back into) the membership while it keeps running; undefined when no such replica. */
export async function replicaSetQuiesced(pool: Db, p: { id: string; quiesced: boolean }): Promise<{ row: ReplicaRow; changed: boolean } | undefined> {
  const { rows } = await pool.query(
    `WITH before AS (SELECT id, quiesced FROM replicas WHERE id = $1 FOR UPDATE)
     UPDATE replicas r SET quiesced = $2 FROM before b WHERE r.id = b.id
     RETURNING r.*, b.quiesced AS was_quiesced, (extract(epoch FROM now() - r.heartbeat_at) * 1000)::bigint AS heartbeat_age_ms`,
    [p.id, p.quiesced],
  );
  return rows[0] ? { row: mapReplica(rows[0]), changed: rows[0].was_quiesced !== p.quiesced } : undefined;
}

export async function replicaSetAddress(pool: Pool, id: string, httpAddress: string): Promise<void> {
  await pool.query(`UPDATE replicas SET http_address = $2 WHERE id = $1`, [id, httpAddress]);
}

/** Clean shutdown: the row stays for forensics but leaves the membership at once. */
export async function replicaStop(pool: Pool, id: string): Promise<void> {
  await pool.query(`UPDATE replicas SET stopped_at = now() WHERE id = $1`, [id]);
  await pool.query(`DELETE FROM coordination_leases WHERE holder = $1`, [id]);
}

export async function replicaList(pool: Db): Promise<ReplicaRow[]> {
  const { rows } = await pool.query(
    `SELECT *, (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint AS heartbeat_age_ms
       FROM replicas ORDER BY started_at, id`,
  );
  return rows.map(mapReplica);
}
