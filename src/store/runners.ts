import { registrationRefusal } from '../core/tokens.js';
import { withTransaction, type Pool, type Db } from './pool.js';
import { prepared } from './prepared.js';

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
  /** The registration token it registered with, so revoking that token can revoke it too. */
  registrationTokenId?: string | null;
};

export async function runnerRegister(db: Db, r: RunnerRegistration): Promise<RunnerRow> {
  const { rows } = await db.query(
    `INSERT INTO runners (id, name, group_name, labels, executors, max_load, max_parallel_steps, site, protocol_version, credential_hash, last_replica, registration_token_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING *`,
    [r.id, r.name, r.group, r.labels, r.executors, r.maxLoad, r.maxParallelSteps, r.site, r.protocolVersion, r.credentialHash, r.replicaId, r.registrationTokenId ?? null],
  );
  return mapRunner(rows[0]);
}

/** A live runner already holds the name a registration asked for. */
export class RunnerNameTakenError extends Error {
  constructor(readonly runnerName: string, readonly holder: { id: string; state: string }) {
    super(`runner name ${runnerName} is taken by ${holder.id} (${holder.state}); pick another --name, or wait until that runner has been offline for two poll windows`);
    this.name = 'RunnerNameTakenError';
  }
}

/** The registration token may not register a runner into the group it asked for; nothing was written. */
export class RegistrationGroupRefusedError extends Error {
  constructor(message: string, readonly group: string | null) {
    super(message);
    this.name = 'RegistrationGroupRefusedError';
  }
}

/** The token a registration presents: its id and the groups it names (none: only groups that are not exclusive). */
export interface RegistrationScope {
  tokenId: string;
  groups: readonly string[];
}

/**
 * Registers a runner under a name no live runner holds: while a runner of that name is online or
 * on the watch list the registration is refused (RunnerNameTakenError), so nobody can pose as
 * another runner in the registry, the audit or a drain by name. An offline holder (a machine
 * rebuilt without its identity file) is retired (deleted_at) and the name passes on. Serialised
 * per name by a transaction-scoped advisory lock. The group must be one the token may join
 * (registrationRefusal), else RegistrationGroupRefusedError before anything is written; the
 * group's row is read FOR SHARE, so making it exclusive waits for this registration to commit.
 */
export async function runnerRegisterExclusive(pool: Pool, r: RunnerRegistration, scope: RegistrationScope): Promise<{ runner: RunnerRow; retired: string[] }> {
  return withTransaction(pool, async (client) => {
    const group = r.group === null ? undefined : (await client.query(`SELECT exclusive FROM runner_groups WHERE name = $1 FOR SHARE`, [r.group])).rows[0];
    const refusal = registrationRefusal({ token: scope.tokenId, tokenGroups: scope.groups, group: r.group, exclusive: group?.exclusive === true });
    if (refusal) throw new RegistrationGroupRefusedError(refusal, r.group);
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('opschain.runner-name:' || $1))`, [r.name]);
    const { rows } = await client.query(`SELECT id, state FROM runners WHERE name = $1 AND deleted_at IS NULL ORDER BY registered_at`, [r.name]);
    const live = rows.find((x) => x.state !== 'offline');
    if (live) throw new RunnerNameTakenError(r.name, { id: live.id, state: live.state });
    const retired = rows.map((x) => x.id as string);
    if (retired.length) await client.query(`UPDATE runners SET deleted_at = now() WHERE id = ANY($1::text[])`, [retired]);
    return { runner: await runnerRegister(client, r), retired };
  });
}

/**
 * NOTIFY channel of runners whose credential answer changed (removed, retired, drained); the
 * payload is the runner id. Sent by a trigger (migration 0003) at commit, whatever the writer.
 */
export const RUNNER_CREDENTIALS_CHANNEL = 'opschain_runner_credentials';

const RUNNERS_BY_CREDENTIALS = prepared(
  `SELECT * FROM runners WHERE credential_hash = ANY($1::text[]) AND deleted_at IS NULL`,
);

/** Live runners by credential hash (many calls' credentials in one read): hash → runner. */
export async function runnersByCredentials(db: Db, credentialHashes: string[]): Promise<Map<string, RunnerRow>> {
  const { rows } = await db.query(RUNNERS_BY_CREDENTIALS([credentialHashes]));
  return new Map(rows.map((r) => [r.credential_hash as string, mapRunner(r)]));
}

const RUNNERS_SEEN = prepared(
  `UPDATE runners r
      SET last_seen_at = greatest(r.last_seen_at, now() - s.ago_ms * interval '1 millisecond'), last_replica = $3, state = 'online'
     FROM unnest($1::text[], $2::int[]) AS s(id, ago_ms)
    WHERE r.id = s.id`,
);

/**
 * Liveness of a batch of runners seen on this replica, in one statement: each stamped with the
 * database's clock less how long ago (by this replica's clock) its call arrived, so a batch
 * written a second late records the sightings as they were; never moved backwards (a later
 * sighting on another replica stands).
 */
export async function runnersSeen(db: Db, p: { replicaId: string; seen: Array<{ runnerId: string; agoMs: number }> }): Promise<void> {
  if (p.seen.length === 0) return;
  await db.query(RUNNERS_SEEN([p.seen.map((x) => x.runnerId), p.seen.map((x) => Math.max(0, Math.round(x.agoMs))), p.replicaId]));
}

/**
 * Removes runners from the registry: their credentials stop working on every replica within the
 * delay of the notice the removal sends (runnersByCredentials reads only live rows; replicas'
 * caches forget them at the notice) and they leave placement. Their live leases are left
 * to the expiry sweep (runner_lost), as for any runner that went away. Returns the removed runners.
 */
export async function runnersRemove(db: Db, p: { ids?: string[]; registrationTokenId?: string }): Promise<Array<{ id: string; name: string }>> {
  const { rows } = await db.query(
    `UPDATE runners SET deleted_at = now(), state = 'offline'
      WHERE deleted_at IS NULL AND (id = ANY($1::text[]) OR registration_token_id = $2)
      RETURNING id, name`,
    [p.ids ?? [], p.registrationTokenId ?? null],
  );
  return rows.map((r) => ({ id: r.id, name: r.name }));
}

/** A live runner by id, else by unique name (Conflict when the name is ambiguous). */
export async function runnerFind(db: Db, idOrName: string): Promise<Array<{ id: string; name: string }>> {
  const { rows } = await db.query(
    `SELECT id, name FROM runners WHERE deleted_at IS NULL AND (id = $1 OR (name = $1 AND NOT EXISTS (SELECT 1 FROM runners WHERE id = $1 AND deleted_at IS NULL))) ORDER BY id`,
    [idOrName],
  );
  return rows.map((r) => ({ id: r.id, name: r.name }));
}
