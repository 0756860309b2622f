import type { Pool, PoolClient } from './pool.js';

type Db = Pool | PoolClient;

export interface RunnerRow {
  id: string;
  name: string;
  group: string | null;
  labels: string[];
  executors: string[];
  maxLoad: number;
  maxParallelSteps: number;
  site: string | null;
  protocolVersion: number;
  credentialHash: string;
  registeredAt: Date;
  lastSeenAt: Date;
  state: string;
  drained: boolean;
}

export const mapRunner = (r: any): RunnerRow => ({
  id: r.id,
  name: r.name,
  group: r.group_name,
  labels: r.labels ?? [],
  executors: r.executors ?? [],
  maxLoad: Number(r.max_load),
  maxParallelSteps: r.max_parallel_steps,
  site: r.site,
  protocolVersion: r.protocol_version,
  credentialHash: r.credential_hash,
  registeredAt: r.registered_at,
  lastSeenAt: r.last_seen_at,
  state: r.state,
  drained: r.drained,
});

export type RunnerRegistration = Pick<RunnerRow, 'id' | 'name' | 'group' | 'labels' | 'executors' | 'maxLoad' | 'maxParallelSteps' | 'site' | 'protocolVersion' | 'credentialHash'> & {
  replicaId: string;
};

export async function runnerRegister(db: Db, r: RunnerRegistration): Promise<RunnerRow> {
  const { rows } = await db.query(
    `INSERT INTO runners (id, name, group_name, labels, executors, max_load, max_parallel_steps, site, protocol_version, credential_hash, last_replica)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *`,
    [r.id, r.name, r.group, r.labels, r.executors, r.maxLoad, r.maxParallelSteps, r.site, r.protocolVersion, r.credentialHash, r.replicaId],
  );
  return mapRunner(rows[0]);
}

export async function runnerByCredential(db: Db, credentialHash: string): Promise<RunnerRow | undefined> {
  const { rows } = await db.query(`SELECT * FROM runners WHERE credential_hash = $1 AND deleted_at IS NULL`, [credentialHash]);
  return rows[0] ? mapRunner(rows[0]) : undefined;
}

/** Liveness: a poll was seen on this replica. */
export async function runnerTouch(db: Db, p: { runnerIds: string[]; replicaId: string }): Promise<void> {
  if (p.runnerIds.length === 0) return;
  await db.query(`UPDATE runners SET last_seen_at = now(), last_replica = $2, state = 'online' WHERE id = ANY($1::text[])`, [p.runnerIds, p.replicaId]);
}
