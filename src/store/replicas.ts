import type { Pool } from './pool.js';

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

export async function replicaHeartbeat(pool: Pool, id: string): Promise<void> {
  await pool.query(`UPDATE replicas SET heartbeat_at = now() WHERE id = $1 AND stopped_at IS NULL`, [id]);
}

export async function replicaSetAddress(pool: Pool, id: string, httpAddress: string): Promise<void> {
  await pool.query(`UPDATE replicas SET http_address = $2 WHERE id = $1`, [id, httpAddress]);
}

/** Clean shutdown: the row stays for forensics but leaves the membership at once. */
export async function replicaStop(pool: Pool, id: string): Promise<void> {
  await pool.query(`UPDATE replicas SET stopped_at = now() WHERE id = $1`, [id]);
  await pool.query(`DELETE FROM coordination_leases WHERE holder = $1`, [id]);
}

export async function replicaList(pool: Pool): Promise<ReplicaRow[]> {
  const { rows } = await pool.query(
    `SELECT *, (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint AS heartbeat_age_ms
       FROM replicas ORDER BY started_at, id`,
  );
  return rows.map(mapReplica);
}
