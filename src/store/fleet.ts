import type { QueueEntry } from '../core/entry.js';
import type { DrainState } from '../core/placement.js';
import type { PoolState } from '../core/plan.js';
import type { VerdictRunner } from '../core/verdict.js';
import { Conflict, NotFound } from '../errors.js';
import { auditRecord } from './audit.js';
import { leasesOutstandingByRun, pinsForRuns } from './leases.js';
import { poolStateRead } from './pools.js';
import { mapEntry } from './queue.js';
import { storeNow, withSnapshot, withTransaction, type Pool, type Db } from './pool.js';
import { postureRead, type FleetPosture } from './posture.js';
import { prepared } from './prepared.js';

/** A registered runner with its group's facts, drain state and running load. */
export interface FleetRunnerRow extends VerdictRunner {
  /** Drained itself or through its group (what matching reads). */
  drained: boolean;
  runnerDrained: boolean;
  groupDrained: boolean;
  drainReason: string | null;
  online: boolean;
  state: string;
  site: string | null;
  maxParallelSteps: number;
  lastSeenAt: Date;
  /** Live leases delivered to it. */
  leases: number;
  /** The run-scoped run it is executing now (the lowest id if several), or null. */
  scopedRunId: number | null;
  /** The registration token it registered with (whose groups it could join), or null. */
  registrationTokenId: string | null;
}

/** A row of PARKED_COLUMNS (or more). */
const mapParked = (r: any): ParkedRunnerRow => ({
  runnerId: r.id,
  group: r.group_name,
  labels: r.labels ?? [],
  executors: r.executors ?? [],
  groupAttributes: r.attributes ?? {},
  exclusive: r.exclusive,
  maxLoad: Number(r.max_load),
  runningLoad: Number(r.running_load),
  drained: r.drained || r.group_drained,
  scopedRunId: r.scoped_run == null ? null : Number(r.scoped_run),
});

/** A row of FLEET_COLUMNS. */
const mapRunner = (r: any): FleetRunnerRow => ({
  ...mapParked(r),
  runnerName: r.name,
  runnerDrained: r.drained,
  groupDrained: r.group_drained,
  drainReason: r.drained ? r.drain_reason : r.group_drained ? r.group_drain_reason : null,
  online: r.state !== 'offline',
  polling: r.state === 'online',
  state: r.state,
  site: r.site,
  maxParallelSteps: r.max_parallel_steps,
  lastSeenAt: r.last_seen_at,
  leases: Number(r.leases),
  registrationTokenId: r.registration_token_id ?? null,
});

/** Everything the fleet views read of a runner (mapRunner). */
const FLEET_COLUMNS = `r.id, r.name, r.group_name, r.labels, r.executors, r.max_load, r.max_parallel_steps, r.site, r.state,
            r.last_seen_at, r.drained, r.drain_reason, r.registration_token_id,
            coalesce(g.attributes, '{}'::jsonb) AS attributes, coalesce(g.exclusive, false) AS exclusive,
            coalesce(g.drained, false) AS group_drained, g.drain_reason AS group_drain_reason,
            coalesce(l.load, 0) AS running_load, coalesce(l.n, 0) AS leases, l.scoped_run`;

/** What a dispatch tick reads of a parked runner (mapParked): no name, state or times to parse. */
const PARKED_COLUMNS = `r.id, r.group_name, r.labels, r.executors, r.max_load, r.drained,
            coalesce(g.attributes, '{}'::jsonb) AS attributes, coalesce(g.exclusive, false) AS exclusive,
            coalesce(g.drained, false) AS group_drained, coalesce(l.load, 0) AS running_load, l.scoped_run`;

/**
 * Undeleted runners whose id `ids` admits (a condition over the id column it is given) with their
 * group's attributes, exclusive and drain flags, and their live leases: their count, their summed
 * load (the running load) and the run-scoped run among them.
 */
const fleetSql = (ids: (column: string) => string, columns: string) => `SELECT ${columns}
       FROM runners r
       LEFT JOIN runner_groups g ON g.name = r.group_name
       LEFT JOIN (SELECT runner_id, sum(load) AS load, count(*) AS n, min(run_id) FILTER (WHERE run_scope) AS scoped_run
                    FROM step_leases
                   WHERE runner_id IS NOT NULL AND ${ids('runner_id')}
                   GROUP BY runner_id) l ON l.runner_id = r.id
      WHERE r.deleted_at IS NULL AND ${ids('r.id')}`;

/** Every runner, or those in $1 when it is not null. */
const FLEET_SQL = fleetSql((id) => `($1::text[] IS NULL OR ${id} = ANY($1::text[]))`, FLEET_COLUMNS);

/** The posture flags, one row whatever the posture table holds. */
const POSTURE_FLAGS = `SELECT coalesce(bool_or(quiesced), false) AS quiesced, coalesce(bool_or(halted), false) AS halted,
                  coalesce(bool_or(system_quiesced), false) AS system_quiesced
             FROM fleet_posture WHERE id`;

const FLEET_PARKED_READ = prepared(
  // The runners are always listed here, so the statement names them plainly: its generic plan
  // reads their leases through the runner index instead of allowing for a null list.
  `SELECT p.quiesced AS posture_fleet_quiesced, p.halted AS posture_halted, p.system_quiesced AS posture_system_quiesced, f.*
     FROM (${POSTURE_FLAGS}) p
     LEFT JOIN (${fleetSql((id) => `${id} = ANY($1::text[])`, PARKED_COLUMNS)}) f ON true`,
);

/**
 * FLEET_PARKED_READ with the most urgent lane holding a due entry other than $2 (the first entry
 * of the order index that is due and not among them: a few index pages on a queue without a
 * backlog of entries waiting out a retry's backoff).
 */
const FLEET_PARKED_READ_AHEAD = prepared(
  `SELECT p.quiesced AS posture_fleet_quiesced, p.halted AS posture_halted, p.system_quiesced AS posture_system_quiesced, a.ahead_lane, f.*
     FROM (${POSTURE_FLAGS}) p
     LEFT JOIN (SELECT q.lane AS ahead_lane FROM queue_ready q
                 WHERE q.blocked_on IS NULL AND q.ready_at <= now() AND q.step_id <> ALL($2::bigint[])
                 ORDER BY q.lane, q.position LIMIT 1) a ON true
     LEFT JOIN (${fleetSql((id) => `${id} = ANY($1::text[])`, PARKED_COLUMNS)}) f ON true`,
);

/** The fleet in one statement: every undeleted runner, or just `runnerIds`. */
export async function fleetRead(db: Db, opts: { runnerIds?: string[] } = {}): Promise<FleetRunnerRow[]> {
  const { rows } = await db.query(`${FLEET_SQL} ORDER BY r.name, r.id`, [opts.runnerIds ?? null]);
  return rows.map(mapRunner);
}

/** What a dispatch tick reads of a parked runner: its placement facts, drain state, running load and scoped run. */
export type ParkedRunnerRow = Pick<FleetRunnerRow, 'runnerId' | 'group' | 'labels' | 'executors' | 'groupAttributes' | 'exclusive' | 'maxLoad' | 'runningLoad' | 'drained' | 'scopedRunId'>;

/** What a dispatch tick reads before it claims: the posture flags and the parked runners' rows. */
export interface ParkedFleet {
  posture: Pick<FleetPosture, 'fleetQuiesced' | 'halted' | 'systemQuiesced'>;
  runners: ParkedRunnerRow[];
}

/**
 * The posture flags and these runners' rows in one statement (one round trip per tick, not two):
 * the flags come back even when no runner matches.
 */
export async function fleetParkedRead(db: Db, runnerIds: string[]): Promise<ParkedFleet> {
  const { rows } = await db.query(FLEET_PARKED_READ([runnerIds]));
  return mapParkedFleet(rows);
}

/**
 * fleetParkedRead, and in the same statement the most urgent lane (lowest id) holding a due,
 * claimable entry of any shard besides `besides` (null: none): what a hand-off of `besides` must
 * not overtake. Every shard, so an estate of several replicas is judged conservatively.
 */
export async function fleetParkedReadAhead(db: Db, runnerIds: string[], besides: number[]): Promise<ParkedFleet & { aheadLane: number | null }> {
  const { rows } = await db.query(FLEET_PARKED_READ_AHEAD([runnerIds, besides]));
  return { ...mapParkedFleet(rows), aheadLane: rows[0].ahead_lane ?? null };
}

function mapParkedFleet(rows: any[]): ParkedFleet {
  const p = rows[0];
  return {
    posture: { fleetQuiesced: p.posture_fleet_quiesced, halted: p.posture_halted, systemQuiesced: p.posture_system_quiesced },
    runners: rows.filter((r) => r.id !== null).map(mapParked),
  };
}

/**
 * runner id → the run-scoped run each of these runners is executing now (read with them): such a
 * runner takes no other run's work until those steps end.
 */
export function scopedRunsOf(runners: FleetRunnerRow[]): Map<string, number> {
  return new Map(runners.filter((r) => r.scopedRunId !== null).map((r) => [r.runnerId, r.scopedRunId!]));
}

/** Every operator drain in force, in one statement however large the fleet: read once per tick. */
export async function fleetDrainState(db: Db): Promise<DrainState> {
  const { rows } = await db.query(
    `SELECT 'runner' AS kind, id AS name FROM runners WHERE drained AND deleted_at IS NULL
     UNION ALL
     SELECT 'group', name FROM runner_groups WHERE drained`,
  );
  return {
    runners: new Set(rows.filter((r) => r.kind === 'runner').map((r) => r.name)),
    groups: new Set(rows.filter((r) => r.kind === 'group').map((r) => r.name)),
  };
}

export interface DrainResult {
  kind: 'runner' | 'group';
  /** Runner ids, or the group name. */
  targets: string[];
  /** The runners' registered names, in the order of `targets` (a runner lever only). */
  names?: string[];
  drained: boolean;
  /** false when it already was in that state (the lever is idempotent). */
  changed: boolean;
}

/**
 * Drains or undrains a runner (by id, else by unique name) or a group, and records the lever in
 * the audit log, in one transaction. A group exists when it has a row or a registered runner names
 * it; a lever never creates what it names, so an unknown group or runner is NotFound.
 */
export async function fleetDrainSet(pool: Pool, p: { runner?: string; group?: string; drained: boolean; reason?: string | null; actor: string; source?: string }): Promise<DrainResult> {
  return withTransaction(pool, async (client) => {
    let result: DrainResult;
    if (p.group !== undefined) {
      const before = await client.query(`SELECT drained FROM runner_groups WHERE name = $1 FOR UPDATE`, [p.group]);
      if (before.rows.length === 0) {
        const named = await client.query(`SELECT 1 FROM runners WHERE group_name = $1 AND deleted_at IS NULL LIMIT 1`, [p.group]);
        if (named.rows.length === 0) throw new NotFound(`no runner group named ${p.group} (see opschain groups list)`);
      }
      await client.query(
        `INSERT INTO runner_groups AS g (name, drained, drain_reason) VALUES ($1, $2, CASE WHEN $2 THEN $3 END)
         ON CONFLICT (name) DO UPDATE SET drained = $2, drain_reason = CASE WHEN $2 THEN coalesce($3, g.drain_reason) END, updated_at = now()`,
        [p.group, p.drained, p.reason ?? null],
      );
      const was: boolean = before.rows[0]?.drained ?? false;
      result = { kind: 'group', targets: [p.group], drained: p.drained, changed: was !== p.drained };
    } else {
      const runner = p.runner ?? '';
      const { rows: found } = await client.query(
        `SELECT id, name, drained FROM runners WHERE deleted_at IS NULL AND (id = $1 OR (name = $1 AND NOT EXISTS (SELECT 1 FROM runners WHERE id = $1 AND deleted_at IS NULL))) FOR UPDATE`,
        [runner],
      );
      if (found.length === 0) throw new NotFound(`no runner with id or name ${runner}`);
      if (found.length > 1) throw new Conflict(`${found.length} runners are named ${runner}: give the runner id (${found.map((r) => r.id).join(', ')})`, 'ambiguous');
      await client.query(
        `UPDATE runners SET drained = $2, drain_reason = CASE WHEN $2 THEN coalesce($3, drain_reason) END WHERE id = $1`,
        [found[0].id, p.drained, p.reason ?? null],
      );
      result = { kind: 'runner', targets: [found[0].id], names: [found[0].name ?? found[0].id], drained: p.drained, changed: found[0].drained !== p.drained };
    }
    await auditRecord(client, {
      actor: p.actor,
      action: p.drained ? 'fleet.drain' : 'fleet.undrain',
      target: `${result.kind}:${result.targets[0]}`,
      source: p.source,
      detail: { reason: p.reason ?? null, changed: result.changed },
    });
    return result;
  });
}

export interface LeasedEntry extends QueueEntry {
  holder: string;
  runnerId: string | null;
  claimedAt: Date;
  deliveredAt: Date | null;
  ackedAt: Date | null;
  expiresAt: Date;
  executing: boolean;
}

/** Everything the fleet-queue view needs, read in a handful of set-based statements. */
export interface FleetQueueSnapshot {
  now: Date;
  ready: QueueEntry[];
  /** How many ready entries exist in all (the list stops at the limit). */
  readyTotal: number;
  leased: LeasedEntry[];
  runners: FleetRunnerRow[];
  posture: FleetPosture;
  pins: Map<number, string>;
  outstandingByRun: Map<number, number>;
  runnerRuns: Map<string, number>;
  pools: PoolState;
  /** step id → its name in the run file, so the queue shows names beside ids. */
  stepNames?: Map<number, string>;
}

/** The whole queue, or (runId) one run's entries only, as `runs show` reads them. */
export async function fleetQueueRead(db: Db, p: { limit?: number; runId?: number } = {}): Promise<FleetQueueSnapshot> {
  // One snapshot: an entry is never both ready and leased in one answer, and its verdict inputs agree with it.
  return withSnapshot(db, async (client) => {
    const limit = p.limit ?? 1000;
    const runId = p.runId ?? null;
    // One run's entries are found through its steps (the queue keeps no index by run).
    const ready =
      runId === null
        ? await client.query(`SELECT *, now() AS db_now, count(*) OVER () AS total FROM queue_ready ORDER BY lane, ready_at, position LIMIT $1`, [limit])
        : await client.query(
            `SELECT q.*, now() AS db_now, count(*) OVER () AS total FROM steps s JOIN queue_ready q ON q.step_id = s.id
              WHERE s.run_id = $2 ORDER BY q.lane, q.ready_at, q.position LIMIT $1`,
            [limit, runId],
          );
    const leased = await client.query(`SELECT * FROM step_leases WHERE $1::bigint IS NULL OR run_id = $1 ORDER BY claimed_at, step_id`, [runId]);
    const runIds = [...new Set([...ready.rows, ...leased.rows].map((r) => Number(r.run_id)))];
    const { runners, posture, pins, outstandingByRun, runnerRuns, pools } = await queueVerdictInputsRead(client, {
      runIds,
      pools: ready.rows.flatMap((r) => (r.pools as string[] | null) ?? []),
    });
    const stepIds = [...new Set([...ready.rows, ...leased.rows].map((r) => Number(r.step_id)))];
    const names = stepIds.length ? (await client.query(`SELECT id, name FROM steps WHERE id = ANY($1::bigint[])`, [stepIds])).rows : [];
    let now: Date = ready.rows[0]?.db_now;
    if (!now) now = await storeNow(client);
    return {
      stepNames: new Map(names.map((r) => [Number(r.id), r.name as string])),
      now,
      ready: ready.rows.map(mapEntry),
      readyTotal: Number(ready.rows[0]?.total ?? 0),
      leased: leased.rows.map((r) => ({
        ...mapEntry(r),
        holder: r.holder,
        runnerId: r.runner_id,
        claimedAt: r.claimed_at,
        deliveredAt: r.delivered_at,
        ackedAt: r.acked_at,
        expiresAt: r.expires_at,
        executing: r.executing,
      })),
      runners,
      posture,
      pins,
      outstandingByRun,
      runnerRuns,
      pools,
    };
  });
}

/** What the verdict ladder reads besides an entry: the fleet, and the pools, pins and out-counts of the entries' runs. */
export interface VerdictInputs {
  runners: FleetRunnerRow[];
  pools: PoolState;
  pins: Map<number, string>;
  outstandingByRun: Map<number, number>;
  runnerRuns: Map<string, number>;
}

/** What a queue view's verdicts read: the posture besides the fleet and the entries' pools, pins and out-counts. */
export interface QueueVerdictInputs extends VerdictInputs {
  posture: FleetPosture;
}

/**
 * The verdict inputs of a queue view, read the one way the admin queue, the fleet queue and the
 * dispatcher's setting aside of unplaceable entries (dispatch/blocked.ts) all read them, so they
 * give an entry the same verdict. Call it on the client of the view's
 * snapshot (withSnapshot): the inputs then agree with the entries read beside them. `pools`: the
 * names the entries demand, or the pool state the caller already read in that snapshot.
 * `posture: false`: the caller judges as if offers flowed (the setting aside does, since a held
 * fleet hides nothing) and no posture is read.
 */
export async function queueVerdictInputsRead(client: Db, p: { runIds: number[]; pools: string[] | PoolState; posture?: true }): Promise<QueueVerdictInputs>;
export async function queueVerdictInputsRead(client: Db, p: { runIds: number[]; pools: string[] | PoolState; posture: false }): Promise<VerdictInputs>;
export async function queueVerdictInputsRead(client: Db, p: { runIds: number[]; pools: string[] | PoolState; posture?: boolean }): Promise<VerdictInputs | QueueVerdictInputs> {
  const runIds = [...new Set(p.runIds)];
  const runners = await fleetRead(client);
  const posture = p.posture === false ? undefined : await postureRead(client);
  const pins = await pinsForRuns(client, runIds);
  const outstandingByRun = await leasesOutstandingByRun(client, runIds);
  const pools = Array.isArray(p.pools) ? await poolStateRead(client, [...new Set(p.pools)]) : p.pools;
  const inputs: VerdictInputs = { runners, pins, outstandingByRun, runnerRuns: scopedRunsOf(runners), pools };
  return posture ? { ...inputs, posture } : inputs;
}

/** Who a drain names: one runner (by id, else unique name) or every runner of a group. */
export interface DrainTargetRow {
  kind: 'runner' | 'group';
  /** The runner id, or the group name. */
  name: string;
  runners: Array<{ id: string; name: string }>;
  /** Whether the target itself is drained now (the runner's own flag, or the group's). */
  drained: boolean;
}

/** Resolves a drain target without changing anything; NotFound when no such runner or group, Conflict when a name is ambiguous. */
export async function drainTargetRead(db: Db, p: { runner?: string; group?: string }): Promise<DrainTargetRow> {
  if (p.group !== undefined) {
    const { rows } = await db.query(
      `SELECT coalesce((SELECT drained FROM runner_groups WHERE name = $1), false) AS drained,
              EXISTS (SELECT 1 FROM runner_groups WHERE name = $1) AS exists,
              coalesce((SELECT json_agg(json_build_object('id', id, 'name', name) ORDER BY name, id) FROM runners WHERE group_name = $1 AND deleted_at IS NULL), '[]'::json) AS runners`,
      [p.group],
    );
    if (!rows[0].exists && rows[0].runners.length === 0) throw new NotFound(`no runner group named ${p.group} (see opschain groups list)`);
    return { kind: 'group', name: p.group, runners: rows[0].runners, drained: rows[0].drained };
  }
  const runner = p.runner ?? '';
  const { rows } = await db.query(
    `SELECT id, name, drained FROM runners WHERE deleted_at IS NULL AND (id = $1 OR (name = $1 AND NOT EXISTS (SELECT 1 FROM runners WHERE id = $1 AND deleted_at IS NULL)))`,
    [runner],
  );
  if (rows.length === 0) throw new NotFound(`no runner with id or name ${runner}`);
  if (rows.length > 1) throw new Conflict(`${rows.length} runners are named ${runner}: give the runner id (${rows.map((r) => r.id).join(', ')})`, 'ambiguous');
  return { kind: 'runner', name: rows[0].id, runners: [{ id: rows[0].id, name: rows[0].name }], drained: rows[0].drained };
}

/** A live lease held by a runner, with the names an operator knows it by. */
export interface RunnerLeaseRow {
  stepId: number;
  runId: number;
  step: string | null;
  run: string | null;
  attempt: number;
  runnerId: string;
  executing: boolean;
  deliveredAt: Date | null;
}

/** The live leases delivered to these runners, oldest first: what a drain still waits for. */
export async function runnerLeasesRead(db: Db, runnerIds: string[]): Promise<RunnerLeaseRow[]> {
  if (runnerIds.length === 0) return [];
  const { rows } = await db.query(
    `SELECT l.step_id, l.run_id, s.name AS step, r.name AS run, l.attempt, l.runner_id, l.executing, l.delivered_at
       FROM step_leases l
       LEFT JOIN steps s ON s.id = l.step_id
       LEFT JOIN runs r ON r.id = l.run_id
      WHERE l.runner_id = ANY($1::text[])
      ORDER BY l.delivered_at NULLS LAST, l.step_id`,
    [runnerIds],
  );
  return rows.map((r) => ({
    stepId: Number(r.step_id),
    runId: Number(r.run_id),
    step: r.step,
    run: r.run,
    attempt: r.attempt,
    runnerId: r.runner_id,
    executing: r.executing,
    deliveredAt: r.delivered_at,
  }));
}

/** Runs pinned to these runners, with how many of their steps are still ready on the queue. */
export async function runnerPinsRead(db: Db, runnerIds: string[]): Promise<Array<{ runId: number; run: string | null; runnerId: string; queued: number }>> {
  if (runnerIds.length === 0) return [];
  const { rows } = await db.query(
    `SELECT p.run_id, r.name AS run, p.runner_id, (SELECT count(*) FROM steps s JOIN queue_ready q ON q.step_id = s.id WHERE s.run_id = p.run_id) AS queued
       FROM run_pins p LEFT JOIN runs r ON r.id = p.run_id
      WHERE p.runner_id = ANY($1::text[])
      ORDER BY p.run_id`,
    [runnerIds],
  );
  return rows.map((r) => ({ runId: Number(r.run_id), run: r.run, runnerId: r.runner_id, queued: Number(r.queued) }));
}
