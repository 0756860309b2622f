import { randomBytes } from 'node:crypto';
import { Conflict, Invalid, NotFound } from '../../errors.js';
import { cronCheck, cronNext } from '../../core/cron.js';
import {
  CATCH_UP_POLICIES,
  OVERLAP_POLICIES,
  oneShotTime,
  payloadMapParse,
  TEMPLATE_NAME,
  WEBHOOK_SECRET_PREFIX,
  type CatchUpPolicy,
  type OverlapPolicy,
  type PayloadMap,
} from '../../core/triggers.js';
import { RunFileInvalid, runFileLoad } from '../../orchestrator/runfile.js';
import { auditRecord } from '../../store/audit.js';
import { storeNow, withTransaction, type Pool, type PoolClient } from '../../store/pool.js';
import {
  oneShotInsert,
  scheduleInsert,
  templateDelete,
  templateInsert,
  templateLatest,
  templateList,
  templateTriggers,
  templateVersions,
  ticksOfTrigger,
  triggerDelete,
  triggerEnabledSet,
  triggerGet,
  triggerList,
  triggersNotify,
  webhookInsert,
  webhookRotate,
  type TemplateRow,
  type TickRow,
  type TriggerRow,
  type WebhookOwner,
} from '../../store/triggers.js';

/**
 * The template and trigger verbs, one function per verb taking the store and its parameters
 * (the shape the operations layer calls). Bad input throws Invalid (exit 2) and writes nothing;
 * an unknown name or id is not_found (exit 3); removing a template in use is a conflict (exit 4).
 */

const notFound = (what: string) => new NotFound(what);
const conflict = (what: string) => new Conflict(what);
const iso = (d: Date | null) => (d ? d.toISOString() : null);

export interface TemplateView {
  name: string;
  version: number;
  versions: number;
  maxConcurrentRuns: number | null;
  dailyCeiling: number | null;
  createdBy: string | null;
  createdAt: string;
}

export interface TemplateDetail extends TemplateView {
  /** The run file as put, for the shown version. */
  source: string;
  /** Triggers that start runs of this template. */
  triggers: number[];
  history: Array<{ version: number; createdBy: string | null; createdAt: string; maxConcurrentRuns: number | null; dailyCeiling: number | null }>;
}

function limitOf(name: string, v: number | undefined | null): number | null {
  if (v === undefined || v === null) return null;
  if (!Number.isInteger(v) || v < 1 || v > 1_000_000) throw new Invalid(`${name}: expected a whole number from 1 to 1000000, got ${v}`);
  return v;
}

/** Stores a new version of a named run definition (validated whole, as `runs submit` would). */
export async function templatePut(pool: Pool, p: { text: string; name?: string; maxConcurrentRuns?: number | null; dailyCeiling?: number | null; actor: string; source?: string }): Promise<TemplateView> {
  const loaded = runFileLoad(p.text);
  const name = p.name ?? loaded.definition.name;
  if (!TEMPLATE_NAME.test(name)) throw new Invalid(`template name ${JSON.stringify(name)}: 1–100 of letters, digits, . _ - (starting with a letter or digit)`);
  const maxConcurrentRuns = limitOf('--max-concurrent-runs', p.maxConcurrentRuns);
  const dailyCeiling = limitOf('--daily-ceiling', p.dailyCeiling);
  const row = await withTransaction(pool, async (client) => {
    const t = await templateInsert(client, { name, source: p.text, maxConcurrentRuns, dailyCeiling, createdBy: p.actor });
    await auditRecord(client, { actor: p.actor, source: p.source, action: 'templates.put', target: `template:${name}`, detail: { version: t.version, maxConcurrentRuns, dailyCeiling } });
    // A raised cap may free launches held back by the old one.
    await triggersNotify(client, `run:${name}`);
    return t;
  });
  return { ...templateView(row), versions: row.version };
}

const templateView = (t: Omit<TemplateRow, 'source'> & { versions?: number }): TemplateView => ({
  name: t.name,
  version: t.version,
  versions: t.versions ?? t.version,
  maxConcurrentRuns: t.maxConcurrentRuns,
  dailyCeiling: t.dailyCeiling,
  createdBy: t.createdBy,
  createdAt: t.createdAt.toISOString(),
});

export async function templatesList(pool: Pool): Promise<TemplateView[]> {
  return (await templateList(pool)).map(templateView);
}

export async function templateShow(pool: Pool, p: { name: string; version?: number }): Promise<TemplateDetail> {
  const versions = await templateVersions(pool, p.name);
  if (versions.length === 0) throw notFound(`no template ${p.name}`);
  const shown = p.version === undefined ? versions[0] : versions.find((v) => v.version === p.version);
  if (!shown) throw notFound(`template ${p.name} has no version ${p.version} (latest is ${versions[0].version})`);
  return {
    ...templateView({ ...shown, versions: versions.length }),
    source: shown.source,
    triggers: await templateTriggers(pool, p.name),
    history: versions.map((v) => ({ version: v.version, createdBy: v.createdBy, createdAt: v.createdAt.toISOString(), maxConcurrentRuns: v.maxConcurrentRuns, dailyCeiling: v.dailyCeiling })),
  };
}

/** Removes every version of a template; refused while a trigger still uses it. */
export async function templateRemove(pool: Pool, p: { name: string; actor: string; source?: string }): Promise<{ name: string; versions: number }> {
  return withTransaction(pool, async (client) => {
    const users = await templateTriggers(client, p.name);
    if (users.length) throw conflict(`template ${p.name} is used by trigger${users.length === 1 ? '' : 's'} ${users.join(', ')}: remove ${users.length === 1 ? 'it' : 'them'} first`);
    const n = await templateDelete(client, p.name);
    if (n === 0) throw notFound(`no template ${p.name}`);
    await auditRecord(client, { actor: p.actor, source: p.source, action: 'templates.remove', target: `template:${p.name}`, detail: { versions: n } });
    return { name: p.name, versions: n };
  });
}

// ─── triggers ─────────────────────────────────────────────────────────────────

export interface TriggerView {
  id: number;
  kind: TriggerRow['kind'];
  template: string;
  enabled: boolean;
  /** Schedules: the next tick; a pending one-shot: its time; otherwise null. */
  nextDueAt: string | null;
  cron: string | null;
  tz: string | null;
  overlap: OverlapPolicy;
  catchUp: CatchUpPolicy | null;
  /** One-shots: pending or fired. */
  status: string | null;
  sets: string[];
  maps: PayloadMap[];
  /** Webhooks: the path to POST to. */
  path: string | null;
  /**
   * Webhooks created with an API token: that token (id, name) and its state. The webhook answers
   * only while it is `live`; null for a webhook created with the store's URL, and for schedules
   * and one-shots, which mint no credential.
   */
  owner: WebhookOwner | null;
  createdBy: string | null;
  createdAt: string;
}

export interface TickView {
  id: number;
  dueAt: string;
  recordedAt: string;
  outcome: TickRow['outcome'];
  runId: number | null;
  firedAt: string | null;
  deferredReason: string | null;
  deferredAt: string | null;
  missed: boolean;
  catchUp: string | null;
  deliveryId: number | null;
  /** The delivery id the webhook answered with: the sender's `X-Opschain-Delivery`, else one derived from the signature (`sig-…`). */
  deliveryKey: string | null;
  detail: string | null;
}

export const triggerView = (t: TriggerRow): TriggerView => ({
  id: t.id,
  kind: t.kind,
  template: t.template,
  enabled: t.enabled,
  nextDueAt: iso(t.nextDueAt),
  cron: t.cron,
  tz: t.tz,
  overlap: t.overlap,
  catchUp: t.catchUp,
  status: t.status,
  sets: t.sets,
  maps: t.maps,
  path: t.kind === 'webhook' ? `/api/hooks/${t.id}` : null,
  owner: t.owner,
  createdBy: t.createdBy,
  createdAt: t.createdAt.toISOString(),
});

export const tickView = (t: TickRow): TickView => ({
  id: t.id,
  dueAt: t.dueAt.toISOString(),
  recordedAt: t.recordedAt.toISOString(),
  outcome: t.outcome,
  runId: t.runId,
  firedAt: iso(t.firedAt),
  deferredReason: t.deferredReason,
  deferredAt: iso(t.deferredAt),
  missed: t.missed,
  catchUp: t.catchUp,
  deliveryId: t.deliveryId,
  deliveryKey: t.deliveryKey ?? null,
  detail: t.detail,
});

function policy<T extends string>(flag: string, value: string | undefined, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(value)) throw new Invalid(`${flag} ${JSON.stringify(value)}: expected one of ${allowed.join(', ')}`);
  return value as T;
}

/** The template must exist and accept the trigger's --set values (checked now, so a typo never waits for 02:00). */
async function templateFor(client: PoolClient, name: string, sets: string[]): Promise<TemplateRow> {
  const t = await templateLatest(client, name);
  if (!t) throw notFound(`no template ${name} (put one with 'opschain templates put FILE')`);
  try {
    runFileLoad(t.source, sets);
  } catch (err) {
    if (err instanceof RunFileInvalid) throw new Invalid(`template ${name} v${t.version} refuses these --set values: ${err.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`);
    throw err;
  }
  return t;
}

async function created(client: PoolClient, id: number, who: { actor: string; source?: string }, kind: string, detail: Record<string, unknown>): Promise<TriggerView> {
  await auditRecord(client, { actor: who.actor, source: who.source, action: `triggers.${kind}.add`, target: `trigger:${id}`, detail });
  await triggersNotify(client, 'trigger');
  return triggerView((await triggerGet(client, id))!);
}

export async function scheduleAdd(pool: Pool, p: { template: string; cron: string; tz?: string; overlap?: string; catchUp?: string; sets?: string[]; actor: string; source?: string }): Promise<TriggerView> {
  const tz = p.tz ?? 'UTC';
  const check = cronCheck(p.cron, tz);
  if (!check.ok) throw new Invalid(check.reason);
  const overlap = policy('--overlap', p.overlap, OVERLAP_POLICIES, 'skip');
  const catchUp = policy('--catch-up', p.catchUp, CATCH_UP_POLICIES, 'none');
  const sets = p.sets ?? [];
  return withTransaction(pool, async (client) => {
    await templateFor(client, p.template, sets);
    const nextDueAt = cronNext(p.cron, tz, await storeNow(client));
    const id = await scheduleInsert(client, { template: p.template, cron: p.cron.trim(), tz, overlap, catchUp, sets, nextDueAt, createdBy: p.actor });
    return created(client, id, p, 'schedule', { template: p.template, cron: p.cron, tz, overlap, catchUp });
  });
}

export async function oneShotAdd(pool: Pool, p: { template: string; at: string; sets?: string[]; actor: string; source?: string }): Promise<TriggerView> {
  const sets = p.sets ?? [];
  return withTransaction(pool, async (client) => {
    const when = oneShotTime(p.at, await storeNow(client));
    if (!when.ok) throw new Invalid(when.reason);
    await templateFor(client, p.template, sets);
    const id = await oneShotInsert(client, { template: p.template, fireAt: when.at, sets, createdBy: p.actor });
    return created(client, id, p, 'once', { template: p.template, at: when.at.toISOString() });
  });
}

export interface WebhookCreated extends TriggerView {
  /** Shown once, at creation; no verb prints it again. */
  secret: string;
}

/**
 * Adds a webhook. `ownerTokenId` is the API token the caller presented (none from a shell with
 * the store's URL): the webhook answers only while that token is live.
 */
export async function webhookAdd(pool: Pool, p: { template: string; sets?: string[]; maps?: string[]; ownerTokenId?: string | null; actor: string; source?: string }): Promise<WebhookCreated> {
  const sets = p.sets ?? [];
  const maps: PayloadMap[] = [];
  for (const m of p.maps ?? []) {
    const parsed = payloadMapParse(m);
    if (!parsed.ok) throw new Invalid(parsed.reason);
    maps.push(parsed.map);
  }
  const secret = newWebhookSecret();
  return withTransaction(pool, async (client) => {
    await templateFor(client, p.template, sets);
    const id = await webhookInsert(client, { template: p.template, secret, sets, maps, ownerTokenId: p.ownerTokenId ?? null, createdBy: p.actor });
    return { ...(await created(client, id, p, 'webhook', { template: p.template, maps })), secret };
  });
}

const newWebhookSecret = () => WEBHOOK_SECRET_PREFIX + randomBytes(32).toString('base64url');

/**
 * `triggers webhook rotate ID` (admin): a new secret, owned by the caller's token (none from a
 * shell with the store's URL). The old secret is refused from now on; this is how an admin
 * brings back a webhook whose owner token was revoked or expired. Deliveries already accepted
 * still fire.
 */
export async function webhookRotateSecret(pool: Pool, p: { id: number; ownerTokenId?: string | null; actor: string; source?: string }): Promise<WebhookCreated> {
  const secret = newWebhookSecret();
  return withTransaction(pool, async (client) => {
    const t = await triggerGet(client, p.id);
    if (!t) throw notFound(`no trigger ${p.id}`);
    if (t.kind !== 'webhook') throw new Invalid(`trigger ${p.id} is a ${t.kind === 'once' ? 'one-shot' : t.kind}: only a webhook has a secret to rotate`);
    await webhookRotate(client, { id: p.id, secret, ownerTokenId: p.ownerTokenId ?? null });
    await auditRecord(client, {
      actor: p.actor,
      source: p.source,
      action: 'triggers.webhook.rotate',
      target: `trigger:${p.id}`,
      detail: { previousOwner: t.owner?.tokenId ?? null, owner: p.ownerTokenId ?? null },
    });
    return { ...triggerView((await triggerGet(client, p.id))!), secret };
  });
}

export async function triggersList(pool: Pool): Promise<TriggerView[]> {
  return (await triggerList(pool)).map(triggerView);
}

export function parseTriggerId(text: string): number {
  if (!/^[1-9]\d{0,15}$/.test(text.trim())) throw new Invalid(`expected a trigger id (a positive number), got ${JSON.stringify(text)}`);
  return Number(text);
}

export async function triggerShow(pool: Pool, p: { id: number; limit?: number }): Promise<TriggerView & { ticks: TickView[] }> {
  const t = await triggerGet(pool, p.id);
  if (!t) throw notFound(`no trigger ${p.id}`);
  const ticks = await ticksOfTrigger(pool, { triggerId: p.id, limit: p.limit ?? 50 });
  return { ...triggerView(t), ticks: ticks.map(tickView) };
}

/** Idempotent: enabling an enabled trigger is success and says nothing changed. */
export async function triggerEnable(pool: Pool, p: { id: number; enabled: boolean; actor: string; source?: string }): Promise<TriggerView & { changed: boolean }> {
  return withTransaction(pool, async (client) => {
    const t = await triggerGet(client, p.id);
    if (!t) throw notFound(`no trigger ${p.id}`);
    const nextDueAt = t.kind === 'schedule' && p.enabled ? cronNext(t.cron!, t.tz!, await storeNow(client)) : undefined;
    const changed = await triggerEnabledSet(client, { id: p.id, kind: t.kind, enabled: p.enabled, nextDueAt });
    if (changed) {
      await auditRecord(client, { actor: p.actor, source: p.source, action: p.enabled ? 'triggers.enable' : 'triggers.disable', target: `trigger:${p.id}` });
      await triggersNotify(client, 'trigger');
    }
    return { ...triggerView((await triggerGet(client, p.id))!), changed };
  });
}

export async function triggerRemove(pool: Pool, p: { id: number; actor: string; source?: string }): Promise<{ id: number; kind: TriggerRow['kind'] }> {
  return withTransaction(pool, async (client) => {
    const t = await triggerGet(client, p.id);
    if (!t) throw notFound(`no trigger ${p.id}`);
    await triggerDelete(client, { id: p.id, kind: t.kind });
    await auditRecord(client, { actor: p.actor, source: p.source, action: 'triggers.remove', target: `trigger:${p.id}`, detail: { kind: t.kind, template: t.template } });
    return { id: p.id, kind: t.kind };
  });
}

/** `opschain admin reconcile`: wakes the leader's launch loop and releases every row it holds back. */
export async function launchReconcile(pool: Pool, p: { actor: string; source?: string }): Promise<{ woken: true }> {
  await withTransaction(pool, async (client) => {
    await auditRecord(client, { actor: p.actor, source: p.source, action: 'admin.reconcile', target: 'launch-loop' });
    await triggersNotify(client, 'reconcile');
  });
  return { woken: true };
}
