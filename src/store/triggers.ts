import type { CatchUpPolicy, OverlapPolicy, PayloadMap } from '../core/triggers.js';
import type { PoolClient, Db } from './pool.js';

/**
 * Templates, triggers (schedules, one-shots, webhooks), webhook deliveries and the tick ledger.
 * Every time comparison takes an optional `now` (`coalesce($now, now())`): production passes
 * nothing and the database's clock decides; tests pass a fixed time.
 */

/** Any replica that writes a trigger, a delivery or finishes a templated run wakes the leader's launch loop. */
export const TRIGGERS_CHANNEL = 'opschain_triggers';

export async function triggersNotify(db: Db, payload = ''): Promise<void> {
  await db.query(`SELECT pg_notify('${TRIGGERS_CHANNEL}', $1)`, [payload]);
}

// ─── templates ────────────────────────────────────────────────────────────────

export interface TemplateRow {
  name: string;
  version: number;
  source: string;
  maxConcurrentRuns: number | null;
  dailyCeiling: number | null;
  createdBy: string | null;
  createdAt: Date;
}

const mapTemplate = (r: any): TemplateRow => ({
  name: r.name,
  version: r.version,
  source: r.source,
  maxConcurrentRuns: r.max_concurrent_runs,
  dailyCeiling: r.daily_ceiling,
  createdBy: r.created_by,
  createdAt: r.created_at,
});

/** Adds the next version of a template (serialised per name by a transaction-scoped advisory lock). */
export async function templateInsert(client: PoolClient, p: { name: string; source: string; maxConcurrentRuns: number | null; dailyCeiling: number | null; createdBy: string | null }): Promise<TemplateRow> {
  await templateLock(client, p.name);
  const { rows } = await client.query(
    `INSERT INTO run_templates (name, version, source, max_concurrent_runs, daily_ceiling, created_by)
     SELECT $1, coalesce(max(version), 0) + 1, $2, $3, $4, $5 FROM run_templates WHERE name = $1
     RETURNING *`,
    [p.name, p.source, p.maxConcurrentRuns, p.dailyCeiling, p.createdBy],
  );
  return mapTemplate(rows[0]);
}

/** Serialises work on one template's runs (cap checks and run creation) across loops and replicas. */
export async function templateLock(client: PoolClient, name: string): Promise<void> {
  await client.query(`SELECT pg_advisory_xact_lock(hashtext('opschain.template:' || $1))`, [name]);
}

export async function templateLatest(db: Db, name: string): Promise<TemplateRow | undefined> {
  const { rows } = await db.query(`SELECT * FROM run_templates WHERE name = $1 ORDER BY version DESC LIMIT 1`, [name]);
  return rows[0] ? mapTemplate(rows[0]) : undefined;
}

export async function templateVersions(db: Db, name: string): Promise<TemplateRow[]> {
  const { rows } = await db.query(`SELECT * FROM run_templates WHERE name = $1 ORDER BY version DESC`, [name]);
  return rows.map(mapTemplate);
}

export interface TemplateSummary extends Omit<TemplateRow, 'source'> {
  versions: number;
}

export async function templateList(db: Db): Promise<TemplateSummary[]> {
  const { rows } = await db.query(
    `SELECT DISTINCT ON (name) name, version, max_concurrent_runs, daily_ceiling, created_by, created_at,
            count(*) OVER (PARTITION BY name) AS versions
       FROM run_templates ORDER BY name, version DESC`,
  );
  return rows.map((r) => {
    const { source: _source, ...rest } = mapTemplate(r);
    return { ...rest, versions: Number(r.versions) };
  });
}

export async function templateDelete(client: PoolClient, name: string): Promise<number> {
  const { rowCount } = await client.query(`DELETE FROM run_templates WHERE name = $1`, [name]);
  return rowCount ?? 0;
}

/** Triggers that start runs of a template (a template in use cannot be removed). */
export async function templateTriggers(db: Db, name: string): Promise<number[]> {
  const { rows } = await db.query(
    `SELECT id FROM schedules WHERE template = $1
     UNION ALL SELECT id FROM one_shots WHERE template = $1 AND status = 'pending'
     UNION ALL SELECT id FROM webhooks WHERE template = $1 ORDER BY 1`,
    [name],
  );
  return rows.map((r) => Number(r.id));
}

// ─── triggers ─────────────────────────────────────────────────────────────────

export type TriggerKind = 'schedule' | 'once' | 'webhook';

export interface TriggerRow {
  id: number;
  kind: TriggerKind;
  template: string;
  enabled: boolean;
  sets: string[];
  /** Schedules: the next tick; one-shots: the fire time while pending; webhooks: null. */
  nextDueAt: Date | null;
  cron: string | null;
  tz: string | null;
  overlap: OverlapPolicy;
  catchUp: CatchUpPolicy | null;
  /** One-shots: pending or fired. */
  status: string | null;
  maps: PayloadMap[];
  /** Webhooks created with an API token: that token, and whether it is still live. */
  owner: WebhookOwner | null;
  createdBy: string | null;
  createdAt: Date;
}

/** The state of the token that owns a webhook, by the store's clock: only `live` lets it answer. */
export type OwnerState = 'live' | 'revoked' | 'expired' | 'unknown';

export interface WebhookOwner { tokenId: string; name: string | null; state: OwnerState }

/** The owner's state of webhook row `w` joined to its token `o` (defined once, for the check and the reads). */
const OWNER_STATE = `CASE WHEN w.owner_token_id IS NULL THEN NULL
       WHEN o.id IS NULL THEN 'unknown'
       WHEN o.revoked_at IS NOT NULL THEN 'revoked'
       WHEN o.expires_at IS NOT NULL AND o.expires_at <= now() THEN 'expired'
       ELSE 'live' END`;

const ownerOf = (r: { owner_token_id: string | null; owner_name: string | null; owner_state: OwnerState | null }): WebhookOwner | null =>
  r.owner_token_id === null ? null : { tokenId: r.owner_token_id, name: r.owner_name, state: r.owner_state ?? 'unknown' };

const TRIGGER_SELECT = `
  SELECT id, 'schedule' AS kind, template, enabled, sets, next_due_at, cron, tz, overlap, catch_up, NULL AS status, '[]'::jsonb AS maps,
         NULL AS owner_token_id, NULL AS owner_name, NULL AS owner_state, created_by, created_at FROM schedules
  UNION ALL
  SELECT id, 'once', template, enabled, sets, CASE WHEN status = 'pending' THEN fire_at END, NULL, NULL, 'allow', NULL, status, '[]'::jsonb,
         NULL, NULL, NULL, created_by, created_at FROM one_shots
  UNION ALL
  SELECT w.id, 'webhook', w.template, w.enabled, w.sets, NULL, NULL, NULL, 'allow', NULL, NULL, w.maps,
         w.owner_token_id, o.name, ${OWNER_STATE}, w.created_by, w.created_at FROM webhooks w LEFT JOIN tokens o ON o.id = w.owner_token_id`;

const mapTrigger = (r: any): TriggerRow => ({
  id: Number(r.id),
  kind: r.kind,
  template: r.template,
  enabled: r.enabled,
  sets: r.sets ?? [],
  nextDueAt: r.next_due_at,
  cron: r.cron,
  tz: r.tz,
  overlap: r.overlap,
  catchUp: r.catch_up,
  status: r.status,
  maps: r.maps ?? [],
  owner: ownerOf(r),
  createdBy: r.created_by,
  createdAt: r.created_at,
});

export async function triggerList(db: Db): Promise<TriggerRow[]> {
  const { rows } = await db.query(`SELECT * FROM (${TRIGGER_SELECT}) t ORDER BY id`);
  return rows.map(mapTrigger);
}

export async function triggerGet(db: Db, id: number): Promise<TriggerRow | undefined> {
  const { rows } = await db.query(`SELECT * FROM (${TRIGGER_SELECT}) t WHERE id = $1`, [id]);
  return rows[0] ? mapTrigger(rows[0]) : undefined;
}

export async function scheduleInsert(client: PoolClient, p: { template: string; cron: string; tz: string; overlap: OverlapPolicy; catchUp: CatchUpPolicy; sets: string[]; nextDueAt: Date; createdBy: string | null }): Promise<number> {
  const { rows } = await client.query(
    `INSERT INTO schedules (template, cron, tz, overlap, catch_up, sets, next_due_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
    [p.template, p.cron, p.tz, p.overlap, p.catchUp, JSON.stringify(p.sets), p.nextDueAt, p.createdBy],
  );
  return Number(rows[0].id);
}

export async function oneShotInsert(client: PoolClient, p: { template: string; fireAt: Date; sets: string[]; createdBy: string | null }): Promise<number> {
  const { rows } = await client.query(`INSERT INTO one_shots (template, fire_at, sets, created_by) VALUES ($1, $2, $3, $4) RETURNING id`, [
    p.template,
    p.fireAt,
    JSON.stringify(p.sets),
    p.createdBy,
  ]);
  return Number(rows[0].id);
}

export async function webhookInsert(client: PoolClient, p: { template: string; secret: string; sets: string[]; maps: PayloadMap[]; ownerTokenId: string | null; createdBy: string | null }): Promise<number> {
  const { rows } = await client.query(`INSERT INTO webhooks (template, secret, sets, maps, owner_token_id, created_by) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, [
    p.template,
    p.secret,
    JSON.stringify(p.sets),
    JSON.stringify(p.maps),
    p.ownerTokenId,
    p.createdBy,
  ]);
  return Number(rows[0].id);
}

/** Gives a webhook a new secret and a new owner; the old secret is refused from now on. Returns whether it exists. */
export async function webhookRotate(client: PoolClient, p: { id: number; secret: string; ownerTokenId: string | null }): Promise<boolean> {
  const { rowCount } = await client.query(`UPDATE webhooks SET secret = $2, owner_token_id = $3 WHERE id = $1`, [p.id, p.secret, p.ownerTokenId]);
  return (rowCount ?? 0) > 0;
}

/**
 * Enables or disables a trigger. A schedule enabled again starts from its next tick after now
 * (`nextDueAt`), not from the ticks of the time it was off; a disabled webhook's pending
 * deliveries are settled at once. Returns whether anything changed.
 */
export async function triggerEnabledSet(client: PoolClient, p: { id: number; kind: TriggerKind; enabled: boolean; nextDueAt?: Date }): Promise<boolean> {
  const table = p.kind === 'schedule' ? 'schedules' : p.kind === 'once' ? 'one_shots' : 'webhooks';
  const extra = p.kind === 'schedule' && p.enabled && p.nextDueAt ? ', next_due_at = $3' : '';
  const params: unknown[] = [p.id, p.enabled];
  if (extra) params.push(p.nextDueAt);
  const { rowCount } = await client.query(`UPDATE ${table} SET enabled = $2${extra} WHERE id = $1 AND enabled <> $2`, params);
  if (p.kind === 'webhook' && !p.enabled) await deliveriesSettleDisabled(client, { webhookId: p.id });
  return (rowCount ?? 0) > 0;
}

export async function triggerDelete(client: PoolClient, p: { id: number; kind: TriggerKind }): Promise<void> {
  const table = p.kind === 'schedule' ? 'schedules' : p.kind === 'once' ? 'one_shots' : 'webhooks';
  await client.query(`DELETE FROM ${table} WHERE id = $1`, [p.id]);
}

// ─── webhooks and deliveries ──────────────────────────────────────────────────

export interface WebhookRow { id: number; template: string; secret: string; enabled: boolean; sets: string[]; maps: PayloadMap[]; owner: WebhookOwner | null }

/**
 * The webhook a signed call names, with its secret (for verification only; never returned to a
 * client) and its owner's state; `at` is the store's now(), the clock its timestamp window is
 * judged by, so every replica accepts the same calls whatever its own clock says.
 */
export async function webhookForVerify(db: Db, id: number): Promise<(WebhookRow & { at: Date }) | undefined> {
  const { rows } = await db.query(
    `SELECT w.id, w.template, w.secret, w.enabled, w.sets, w.maps, w.owner_token_id, o.name AS owner_name, ${OWNER_STATE} AS owner_state, now() AS at
       FROM webhooks w LEFT JOIN tokens o ON o.id = w.owner_token_id WHERE w.id = $1`,
    [id],
  );
  const r = rows[0];
  return r ? { id: Number(r.id), template: r.template, secret: r.secret, enabled: r.enabled, sets: r.sets, maps: r.maps, owner: ownerOf(r), at: r.at } : undefined;
}

/** Records a verified delivery; undefined when its delivery id or signature was seen before (a replay). */
export async function deliveryInsert(
  db: Db,
  p: { webhookId: number; deliveryKey: string; signature: string; payload: string; traceparent?: string },
): Promise<{ id: number; deliveryKey: string } | undefined> {
  const { rows } = await db.query(
    `WITH ins AS (
       INSERT INTO webhook_deliveries (webhook_id, delivery_key, signature, payload, traceparent) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT DO NOTHING RETURNING id, delivery_key)
     SELECT ins.id, ins.delivery_key, pg_notify('${TRIGGERS_CHANNEL}', 'delivery') FROM ins`,
    [p.webhookId, p.deliveryKey, p.signature, p.payload, p.traceparent ?? null],
  );
  return rows[0] ? { id: Number(rows[0].id), deliveryKey: rows[0].delivery_key } : undefined;
}

export async function deliveryCount(db: Db, webhookId: number): Promise<number> {
  const { rows } = await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1`, [webhookId]);
  return rows[0].n;
}

export async function deliveriesSettleDisabled(db: Db, p: { webhookId?: number } = {}): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE webhook_deliveries d SET status = 'settled', settled_at = now(), detail = 'webhook disabled before the delivery fired'
       FROM webhooks w
      WHERE d.status = 'pending' AND w.id = d.webhook_id AND NOT w.enabled AND ($1::bigint IS NULL OR w.id = $1)`,
    [p.webhookId ?? null],
  );
  return rowCount ?? 0;
}

/** Deletes decided deliveries older than the retention, judged at `now` (the store's now() unless given). */
export async function deliveriesPrune(db: Db, p: { retentionMs: number; now?: Date }): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM webhook_deliveries WHERE received_at < coalesce($2::timestamptz, now()) - $1 * interval '1 millisecond' AND status <> 'pending'`,
    [p.retentionMs, p.now ?? null],
  );
  return rowCount ?? 0;
}

/** Deletes decided ticks older than the retention, judged at `now` (the store's now() unless given). */
export async function ticksPrune(db: Db, p: { retentionMs: number; now?: Date }): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM trigger_ticks WHERE recorded_at < coalesce($2::timestamptz, now()) - $1 * interval '1 millisecond' AND outcome <> 'pending' AND NOT (outcome = 'missed' AND catch_up IS NULL)`,
    [p.retentionMs, p.now ?? null],
  );
  return rowCount ?? 0;
}

// ─── the launch loop's probe and claims ───────────────────────────────────────

export interface LaunchProbe {
  /** The time the probe compared against (`now` if given, else the database's). */
  now: Date;
  halted: boolean;
  oneShot: Date | null;
  schedule: Date | null;
  delivery: Date | null;
  launch: Date | null;
  /** Missed ticks whose catch-up is not decided yet. */
  missed: Date | null;
}

/** The probe statement (exported so a test can EXPLAIN exactly it): $1 now, $2 deferred ticks, $3 deferred deliveries. */
export const LAUNCH_PROBE_SQL = `SELECT coalesce($1::timestamptz, now()) AS now,
            coalesce((SELECT halted FROM fleet_posture WHERE id), false) AS halted,
            (SELECT min(fire_at) FROM one_shots WHERE status = 'pending' AND enabled) AS one_shot,
            (SELECT min(next_due_at) FROM schedules WHERE enabled) AS schedule,
            (SELECT min(received_at) FROM webhook_deliveries WHERE status = 'pending' AND id <> ALL($3::bigint[])) AS delivery,
            (SELECT min(recorded_at) FROM trigger_ticks WHERE outcome = 'pending' AND id <> ALL($2::bigint[])) AS launch,
            (SELECT min(due_at) FROM trigger_ticks WHERE outcome = 'missed' AND catch_up IS NULL) AS missed`;

/**
 * The earliest due time of each source, one partial-index lookup each: pending enabled one-shots,
 * enabled schedules, pending deliveries, undispatched launches (pending ticks, less the ones the
 * loop holds back), and missed ticks awaiting catch-up.
 */
export async function launchProbe(db: Db, p: { now?: Date; deferredTicks: number[]; deferredDeliveries: number[] }): Promise<LaunchProbe> {
  const { rows } = await db.query(
    LAUNCH_PROBE_SQL,
    [p.now ?? null, p.deferredTicks, p.deferredDeliveries],
  );
  const r = rows[0];
  return { now: r.now, halted: r.halted, oneShot: r.one_shot, schedule: r.schedule, delivery: r.delivery, launch: r.launch, missed: r.missed };
}

export interface TickInsert {
  triggerId: number;
  kind: TriggerKind;
  template: string;
  dueAt: Date;
  outcome: 'pending' | 'missed' | 'failed';
  overlap: OverlapPolicy;
  sets: string[];
  deliveryId?: number | null;
  missed?: boolean;
  catchUp?: string | null;
  detail?: string | null;
}

/**
 * Records ticks. A schedule tick already in the ledger is recorded again as `deduplicated` (never
 * fired twice). Returns the id and final outcome of each, in order.
 */
export async function ticksInsert(client: PoolClient, ticks: TickInsert[], now?: Date): Promise<Array<{ id: number; outcome: string }>> {
  const out: Array<{ id: number; outcome: string }> = [];
  for (const t of ticks) {
    const params = [t.triggerId, t.kind, t.template, t.dueAt, t.outcome, t.overlap, t.sets, t.deliveryId ?? null, t.missed ?? false, t.catchUp ?? null, t.detail ?? null, now ?? null];
    const { rows } = await client.query(
      `INSERT INTO trigger_ticks (trigger_id, kind, template, due_at, outcome, overlap, sets, delivery_id, missed, catch_up, detail, recorded_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, coalesce($12::timestamptz, now()))
       ON CONFLICT (trigger_id, due_at) WHERE kind = 'schedule' AND outcome <> 'deduplicated' DO NOTHING RETURNING id, outcome`,
      params,
    );
    if (rows[0]) out.push({ id: Number(rows[0].id), outcome: rows[0].outcome });
    else {
      params[4] = 'deduplicated';
      params[10] = 'this tick was already recorded';
      const { rows: dup } = await client.query(
        `INSERT INTO trigger_ticks (trigger_id, kind, template, due_at, outcome, overlap, sets, delivery_id, missed, catch_up, detail, recorded_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, coalesce($12::timestamptz, now())) RETURNING id, outcome`,
        params,
      );
      out.push({ id: Number(dup[0].id), outcome: dup[0].outcome });
    }
  }
  return out;
}

export interface ClaimedOneShot { id: number; template: string; fireAt: Date; sets: string[] }

/** Claims (CAS pending → fired) up to `limit` due one-shots, earliest first; two loops never claim one row twice. */
export async function oneShotsClaim(client: PoolClient, p: { now?: Date; limit: number }): Promise<ClaimedOneShot[]> {
  const { rows } = await client.query(
    `WITH picked AS (
       SELECT id FROM one_shots WHERE status = 'pending' AND enabled AND fire_at <= coalesce($1::timestamptz, now())
        ORDER BY fire_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
     UPDATE one_shots o SET status = 'fired', fired_at = coalesce($1::timestamptz, now())
       FROM picked WHERE o.id = picked.id AND o.status = 'pending' AND o.enabled
     RETURNING o.id, o.template, o.fire_at, o.sets`,
    [p.now ?? null, p.limit],
  );
  return rows.map((r) => ({ id: Number(r.id), template: r.template, fireAt: r.fire_at, sets: r.sets })).sort((a, b) => a.fireAt.getTime() - b.fireAt.getTime() || a.id - b.id);
}

export interface ClaimedDelivery { id: number; webhookId: number; template: string; receivedAt: Date; payload: string; sets: string[]; maps: PayloadMap[] }

/** Claims (CAS pending → accepted) up to `limit` pending deliveries of enabled webhooks, oldest first. */
export async function deliveriesClaim(client: PoolClient, p: { now?: Date; limit: number }): Promise<ClaimedDelivery[]> {
  const { rows } = await client.query(
    `WITH picked AS (
       SELECT d2.id FROM webhook_deliveries d2 JOIN webhooks w2 ON w2.id = d2.webhook_id
        WHERE d2.status = 'pending' AND w2.enabled AND d2.received_at <= coalesce($1::timestamptz, now())
        ORDER BY d2.received_at, d2.id LIMIT $2 FOR UPDATE OF d2 SKIP LOCKED)
     UPDATE webhook_deliveries d SET status = 'accepted', settled_at = coalesce($1::timestamptz, now())
       FROM picked, webhooks w
      WHERE d.id = picked.id AND d.status = 'pending' AND w.id = d.webhook_id
     RETURNING d.id, d.webhook_id, w.template, d.received_at, d.payload, w.sets, w.maps`,
    [p.now ?? null, p.limit],
  );
  return rows
    .map((r) => ({ id: Number(r.id), webhookId: Number(r.webhook_id), template: r.template, receivedAt: r.received_at, payload: r.payload, sets: r.sets, maps: r.maps }))
    .sort((a, b) => a.receivedAt.getTime() - b.receivedAt.getTime() || a.id - b.id);
}

/** Pending deliveries the loop cannot fire yet (their webhook is disabled): held until housekeeping settles them. */
export async function deliveriesOfDisabled(db: Db, p: { now?: Date; limit: number }): Promise<number[]> {
  const { rows } = await db.query(
    `SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.status = 'pending' AND NOT w.enabled AND d.received_at <= coalesce($1::timestamptz, now()) ORDER BY d.received_at LIMIT $2`,
    [p.now ?? null, p.limit],
  );
  return rows.map((r) => Number(r.id));
}

export interface DueSchedule { id: number; template: string; cron: string; tz: string; overlap: OverlapPolicy; catchUp: CatchUpPolicy; sets: string[]; nextDueAt: Date }

/** Locks up to `limit` due enabled schedules, earliest first, skipping rows another loop holds. */
export async function schedulesDueLock(client: PoolClient, p: { now?: Date; limit: number }): Promise<DueSchedule[]> {
  const { rows } = await client.query(
    `SELECT id, template, cron, tz, overlap, catch_up, sets, next_due_at FROM schedules
      WHERE enabled AND next_due_at <= coalesce($1::timestamptz, now())
      ORDER BY next_due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [p.now ?? null, p.limit],
  );
  return rows.map((r) => ({ id: Number(r.id), template: r.template, cron: r.cron, tz: r.tz, overlap: r.overlap, catchUp: r.catch_up, sets: r.sets, nextDueAt: r.next_due_at }));
}

/** Moves a schedule to its next tick, only from the tick this loop read (compare-and-set). */
export async function scheduleAdvance(client: PoolClient, p: { id: number; from: Date; to: Date }): Promise<boolean> {
  const { rowCount } = await client.query(`UPDATE schedules SET next_due_at = $3 WHERE id = $1 AND next_due_at = $2`, [p.id, p.from, p.to]);
  return (rowCount ?? 0) > 0;
}

// ─── launches (pending ticks) ─────────────────────────────────────────────────

export interface TickRow {
  id: number;
  triggerId: number;
  kind: TriggerKind;
  template: string;
  dueAt: Date;
  recordedAt: Date;
  outcome: 'pending' | 'fired' | 'skipped_overlap' | 'deduplicated' | 'missed' | 'failed';
  overlap: OverlapPolicy;
  sets: string[];
  deliveryId: number | null;
  /** The delivery's id as the webhook answered it (`X-Opschain-Delivery`, else `sig-…`); read by ticksOfTrigger only. */
  deliveryKey?: string | null;
  deferredReason: string | null;
  deferredAt: Date | null;
  missed: boolean;
  catchUp: string | null;
  runId: number | null;
  firedAt: Date | null;
  detail: string | null;
}

const mapTick = (r: any): TickRow => ({
  id: Number(r.id),
  triggerId: Number(r.trigger_id),
  kind: r.kind,
  template: r.template,
  dueAt: r.due_at,
  recordedAt: r.recorded_at,
  outcome: r.outcome,
  overlap: r.overlap,
  sets: r.sets ?? [],
  deliveryId: r.delivery_id === null ? null : Number(r.delivery_id),
  ...(r.delivery_key !== undefined ? { deliveryKey: r.delivery_key } : {}),
  deferredReason: r.deferred_reason,
  deferredAt: r.deferred_at,
  missed: r.missed,
  catchUp: r.catch_up,
  runId: r.run_id === null ? null : Number(r.run_id),
  firedAt: r.fired_at,
  detail: r.detail,
});

/** Undispatched launches, oldest first, less the ones held back. */
export async function launchesPending(db: Db, p: { now?: Date; limit: number; exclude: number[] }): Promise<TickRow[]> {
  const { rows } = await db.query(
    `SELECT * FROM trigger_ticks WHERE outcome = 'pending' AND recorded_at <= coalesce($1::timestamptz, now()) AND id <> ALL($3::bigint[])
      ORDER BY recorded_at, id LIMIT $2`,
    [p.now ?? null, p.limit, p.exclude],
  );
  return rows.map(mapTick);
}

/** Locks one launch if it is still pending (the compare-and-set of the launch stage). */
export async function launchLock(client: PoolClient, id: number): Promise<TickRow | undefined> {
  const { rows } = await client.query(`SELECT * FROM trigger_ticks WHERE id = $1 AND outcome = 'pending' FOR UPDATE`, [id]);
  return rows[0] ? mapTick(rows[0]) : undefined;
}

export interface TemplateLoad { running: number; today: number; triggerRunning: number[]; olderPending: number | null }

/** What the caps and the overlap policy look at: the template's running runs and runs since midnight UTC, and this trigger's. */
export async function templateLoad(client: PoolClient, p: { template: string; triggerId: number; tickId: number; now?: Date }): Promise<TemplateLoad> {
  const { rows } = await client.query(
    `SELECT (SELECT count(*)::int FROM runs WHERE template_name = $1 AND status = 'running') AS running,
            (SELECT count(*)::int FROM runs WHERE template_name = $1 AND created_at >= date_trunc('day', coalesce($4::timestamptz, now()) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS today,
            ARRAY(SELECT id FROM runs WHERE trigger_id = $2 AND status = 'running' ORDER BY id) AS trigger_running,
            (SELECT min(id) FROM trigger_ticks WHERE trigger_id = $2 AND outcome = 'pending' AND id < $3) AS older_pending`,
    [p.template, p.triggerId, p.tickId, p.now ?? null],
  );
  const r = rows[0];
  return { running: r.running, today: r.today, triggerRunning: (r.trigger_running ?? []).map(Number), olderPending: r.older_pending === null ? null : Number(r.older_pending) };
}

/** What a delivery hands the run it starts: its payload, and the caller's traceparent when one came with it. */
export async function deliveryForRun(db: Db, id: number): Promise<{ payload: string; traceparent: string | null } | undefined> {
  const { rows } = await db.query(`SELECT payload, traceparent FROM webhook_deliveries WHERE id = $1`, [id]);
  return rows[0] ? { payload: rows[0].payload, traceparent: rows[0].traceparent ?? null } : undefined;
}

/** Marks a run as started by a trigger from a template version (and gives it the webhook payload). */
export async function runTriggerSet(client: PoolClient, p: { runId: number; template: string; version: number; triggerId: number; payload: string | null }): Promise<void> {
  await client.query(`UPDATE runs SET template_name = $2, template_version = $3, trigger_id = $4, trigger_payload = $5 WHERE id = $1`, [p.runId, p.template, p.version, p.triggerId, p.payload]);
}

export async function launchFired(client: PoolClient, p: { id: number; runId: number; now?: Date }): Promise<void> {
  await client.query(`UPDATE trigger_ticks SET outcome = 'fired', run_id = $2, fired_at = coalesce($3::timestamptz, now()) WHERE id = $1`, [p.id, p.runId, p.now ?? null]);
}

/** Records why a launch waits; the first deferral's time is kept. */
export async function launchDeferred(client: PoolClient, p: { id: number; reason: string; now?: Date }): Promise<void> {
  await client.query(`UPDATE trigger_ticks SET deferred_reason = $2, deferred_at = coalesce(deferred_at, coalesce($3::timestamptz, now())) WHERE id = $1`, [p.id, p.reason, p.now ?? null]);
}

/** Settles a launch that will not fire, if it is still pending; says whether it was. */
export async function launchSettled(db: Db, p: { id: number; outcome: 'skipped_overlap' | 'failed'; detail: string }): Promise<boolean> {
  const { rowCount } = await db.query(`UPDATE trigger_ticks SET outcome = $2, detail = $3 WHERE id = $1 AND outcome = 'pending'`, [p.id, p.outcome, p.detail]);
  return (rowCount ?? 0) > 0;
}

// ─── catch-up after a halt ────────────────────────────────────────────────────

export interface MissedTick { id: number; triggerId: number; dueAt: Date; policy: CatchUpPolicy | null }

/** Missed ticks not yet decided, with their schedule's catch-up policy (null when the schedule is gone). */
export async function missedLock(client: PoolClient, p: { limit: number }): Promise<MissedTick[]> {
  const { rows } = await client.query(
    `SELECT t.id, t.trigger_id, t.due_at, s.catch_up FROM trigger_ticks t LEFT JOIN schedules s ON s.id = t.trigger_id
      WHERE t.outcome = 'missed' AND t.catch_up IS NULL ORDER BY t.due_at, t.id LIMIT $1 FOR UPDATE OF t SKIP LOCKED`,
    [p.limit],
  );
  return rows.map((r) => ({ id: Number(r.id), triggerId: Number(r.trigger_id), dueAt: r.due_at, policy: r.catch_up }));
}

/** The latest missed tick of each schedule still waiting for catch-up (for `last`). */
export async function missedLatest(client: PoolClient, triggerIds: number[]): Promise<Map<number, number>> {
  const { rows } = await client.query(
    `SELECT DISTINCT ON (trigger_id) trigger_id, id FROM trigger_ticks
      WHERE trigger_id = ANY($1::bigint[]) AND outcome = 'missed' AND catch_up IS NULL ORDER BY trigger_id, due_at DESC, id DESC`,
    [triggerIds],
  );
  return new Map(rows.map((r) => [Number(r.trigger_id), Number(r.id)]));
}

/** Decides a missed tick: relaunch it (pending) or leave it missed, saying what catch-up did. */
export async function missedDecide(client: PoolClient, p: { id: number; relaunch: boolean; catchUp: string; now?: Date }): Promise<void> {
  await client.query(
    `UPDATE trigger_ticks SET catch_up = $3, outcome = CASE WHEN $2 THEN 'pending' ELSE outcome END,
            recorded_at = CASE WHEN $2 THEN coalesce($4::timestamptz, now()) ELSE recorded_at END WHERE id = $1`,
    [p.id, p.relaunch, p.catchUp, p.now ?? null],
  );
}

// ─── reads ────────────────────────────────────────────────────────────────────

export async function ticksOfTrigger(db: Db, p: { triggerId: number; limit: number }): Promise<TickRow[]> {
  const { rows } = await db.query(
    `SELECT t.*, d.delivery_key FROM trigger_ticks t LEFT JOIN webhook_deliveries d ON d.id = t.delivery_id
      WHERE t.trigger_id = $1 ORDER BY t.id DESC LIMIT $2`,
    [p.triggerId, p.limit],
  );
  return rows.map(mapTick);
}

export async function tickGet(db: Db, id: number): Promise<TickRow | undefined> {
  const { rows } = await db.query(`SELECT * FROM trigger_ticks WHERE id = $1`, [id]);
  return rows[0] ? mapTick(rows[0]) : undefined;
}

export interface TriggerDueRow { id: number; kind: 'schedule' | 'once'; template: string; dueAt: Date }

export interface WaitingLaunchRow { id: number; triggerId: number; kind: TriggerKind; template: string; dueAt: Date; recordedAt: Date; deferredReason: string | null }

/**
 * For the queue views, in one statement: the next due time of each enabled schedule and pending
 * one-shot (soonest first), and the launches not yet fired (oldest first) with how many in all.
 */
export async function triggersQueueRead(db: Db, p: { limit: number }): Promise<{ due: TriggerDueRow[]; waiting: { items: WaitingLaunchRow[]; total: number } }> {
  const { rows } = await db.query(
    `SELECT (SELECT coalesce(json_agg(d ORDER BY d.due_at, d.id), '[]'::json) FROM (
               SELECT id, 'schedule' AS kind, template, next_due_at AS due_at FROM schedules WHERE enabled
               UNION ALL
               SELECT id, 'once', template, fire_at FROM one_shots WHERE status = 'pending' AND enabled
               ORDER BY due_at, id LIMIT $1) d) AS due,
            (SELECT coalesce(json_agg(w ORDER BY w.recorded_at, w.id), '[]'::json) FROM (
               SELECT id, trigger_id, kind, template, due_at, recorded_at, deferred_reason FROM trigger_ticks
                WHERE outcome = 'pending' ORDER BY recorded_at, id LIMIT $1) w) AS waiting,
            (SELECT count(*) FROM trigger_ticks WHERE outcome = 'pending') AS waiting_total`,
    [p.limit],
  );
  const r = rows[0];
  return {
    due: (r.due as any[]).map((d) => ({ id: Number(d.id), kind: d.kind, template: d.template, dueAt: new Date(d.due_at) })),
    waiting: {
      items: (r.waiting as any[]).map((w) => ({
        id: Number(w.id),
        triggerId: Number(w.trigger_id),
        kind: w.kind,
        template: w.template,
        dueAt: new Date(w.due_at),
        recordedAt: new Date(w.recorded_at),
        deferredReason: w.deferred_reason,
      })),
      total: Number(r.waiting_total),
    },
  };
}
