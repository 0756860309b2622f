import type { Db } from './pool.js';

export const LEADER_LEASE = 'leader';
export const shardLeaseName = (shard: number): string => `shard:${shard}`;

/** The shard number of a `shard:N` lease name, or undefined for any other lease. */
export function shardOfLeaseName(name: string): number | undefined {
  const m = /^shard:(\d+)$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

export interface CoordinationLease {
  name: string;
  holder: string;
  /** Fencing token: changes whenever the lease changes hands, kept across renewals. */
  token: number;
  acquiredAt: Date;
  expiresAt: Date;
}

const mapLease = (r: any): CoordinationLease => ({
  name: r.name,
  holder: r.holder,
  token: Number(r.token),
  acquiredAt: r.acquired_at,
  expiresAt: r.expires_at,
});

/**
 * Takes or renews named leases in one conditional statement judged by the database clock: a
 * name is granted when it is free, expired, or already held by `holder`. Returns only the names
 * granted. A lease that changes hands gets a fresh token from coordination_token_seq; a renewal
 * keeps its token, so a token names one uninterrupted tenure. Names are processed in the order
 * given, so callers that all pass them sorted can never deadlock each other. `now`, when given,
 * stands for the database clock (tests set the time).
 */
export async function coordinationLeaseAcquire(db: Db, p: { names: string[]; holder: string; ttlMs: number; now?: Date }): Promise<CoordinationLease[]> {
  if (p.names.length === 0) return [];
  const { rows } = await db.query(
    `WITH clock AS (SELECT coalesce($4::timestamptz, now()) AS now)
     INSERT INTO coordination_leases AS l (name, holder, token, acquired_at, expires_at)
     SELECT n.name, $2, nextval('coordination_token_seq'), clock.now, clock.now + $3 * interval '1 millisecond'
       FROM unnest($1::text[]) WITH ORDINALITY AS n(name, ord), clock
      ORDER BY n.ord
     ON CONFLICT (name) DO UPDATE
        SET holder = EXCLUDED.holder,
            token = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > EXCLUDED.acquired_at THEN l.token ELSE EXCLUDED.token END,
            acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > EXCLUDED.acquired_at THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
            expires_at = EXCLUDED.expires_at
      WHERE l.holder = EXCLUDED.holder OR l.expires_at <= EXCLUDED.acquired_at
     RETURNING l.*`,
    [p.names, p.holder, p.ttlMs, p.now ?? null],
  );
  return rows.map(mapLease);
}

/** Gives up named leases this holder holds (a lease another holder took meanwhile is left alone). */
export async function coordinationLeaseRelease(db: Db, p: { names: string[]; holder: string }): Promise<string[]> {
  if (p.names.length === 0) return [];
  const { rows } = await db.query(`DELETE FROM coordination_leases WHERE holder = $1 AND name = ANY($2::text[]) RETURNING name`, [p.holder, p.names]);
  return rows.map((r) => r.name as string);
}

/** Every lease still valid by the database clock (or at `now` when given). */
export async function coordinationLeaseList(db: Db, p: { now?: Date } = {}): Promise<CoordinationLease[]> {
  const { rows } = await db.query(`SELECT * FROM coordination_leases WHERE expires_at > coalesce($1::timestamptz, now()) ORDER BY name`, [p.now ?? null]);
  return rows.map(mapLease);
}

export interface Member {
  id: string;
  site: string | null;
}

/**
 * The live membership: heartbeat younger than the staleness window, not stopped, not quiesced.
 * A quiesced replica keeps heartbeating (and serving HTTP) but owns nothing. Judged at `now`
 * when given (tests set the time), else by the database clock.
 */
export async function membershipLive(db: Db, p: { stalenessMs: number; now?: Date }): Promise<Member[]> {
  const { rows } = await db.query(
    `SELECT id, site FROM replicas
      WHERE stopped_at IS NULL AND NOT quiesced AND heartbeat_at > coalesce($2::timestamptz, now()) - $1 * interval '1 millisecond'
      ORDER BY id`,
    [p.stalenessMs, p.now ?? null],
  );
  return rows.map((r) => ({ id: r.id, site: r.site }));
}

/**
 * Deletes membership rows whose heartbeat is older than the retention, except any still named
 * as holder of a valid coordination lease, both judged at `now` when given, else by the database
 * clock. Returns the ids reaped.
 */
export async function replicaReap(db: Db, p: { retentionMs: number; now?: Date }): Promise<string[]> {
  const { rows } = await db.query(
    `DELETE FROM replicas r
      WHERE r.heartbeat_at < coalesce($2::timestamptz, now()) - $1 * interval '1 millisecond'
        AND NOT EXISTS (SELECT 1 FROM coordination_leases c WHERE c.holder = r.id AND c.expires_at > coalesce($2::timestamptz, now()))
     RETURNING r.id`,
    [p.retentionMs, p.now ?? null],
  );
  return rows.map((r) => r.id as string);
}

/** Ages out enqueue-idempotency bookkeeping (judged at `now` when given, else by the database clock); returns how many rows went. */
export async function completedAttemptsPrune(db: Db, p: { retentionDays: number; now?: Date }): Promise<number> {
  const { rowCount } = await db.query(`DELETE FROM completed_attempts WHERE done_at < coalesce($2::timestamptz, now()) - $1 * interval '1 day'`, [p.retentionDays, p.now ?? null]);
  return rowCount ?? 0;
}

/** Replicas LISTEN here: a lease released or wanted wakes every coordination loop at once. */
export const COORDINATION_CHANNEL = 'opschain_coordination';

/** Wakes the coordination loops of the other replicas; `from` lets the sender ignore its own echo. */
export async function coordinationNotify(db: Db, p: { from: string }): Promise<void> {
  await db.query(`SELECT pg_notify('${COORDINATION_CHANNEL}', $1)`, [p.from]);
}
