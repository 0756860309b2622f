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

export interface RunnerRegistration {
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
  replicaId: string;
}

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

/** What placement needs of the runners parked this tick, in one set-based read. */
export interface RunnerPosture {
  runnerId: string;
  drained: boolean;
  group: string | null;
  labels: string[];
  executors: string[];
  groupAttributes: Record<string, string>;
  exclusive: boolean;
  maxLoad: number;
  runningLoad: number;
}

export async function runnerPostures(db: Db, runnerIds: string[]): Promise<Map<string, RunnerPosture>> {
  const out = new Map<string, RunnerPosture>();
  if (runnerIds.length === 0) return out;
  const { rows } = await db.query(
    `SELECT r.id, r.group_name, r.labels, r.executors, r.max_load,
            (r.drained OR coalesce(g.drained, false) OR r.deleted_at IS NOT NULL) AS drained,
            coalesce(g.attributes, '{}'::jsonb) AS attributes, coalesce(g.exclusive, false) AS exclusive,
            coalesce(l.running_load, 0) AS running_load
       FROM runners r
       LEFT JOIN runner_groups g ON g.name = r.group_name
       LEFT JOIN (SELECT runner_id, sum(load) AS running_load FROM scheduler_job_leases
                   WHERE runner_id = ANY($1::text[]) GROUP BY runner_id) l ON l.runner_id = r.id
      WHERE r.id = ANY($1::text[])`,
    [runnerIds],
  );
  for (const r of rows) {
    out.set(r.id, {
      runnerId: r.id,
      drained: r.drained,
      group: r.group_name,
      labels: r.labels ?? [],
      executors: r.executors ?? [],
      groupAttributes: r.attributes ?? {},
      exclusive: r.exclusive,
      maxLoad: Number(r.max_load),
      runningLoad: Number(r.running_load),
    });
  }
  return out;
}
