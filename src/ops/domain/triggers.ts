import {
  launchReconcile,
  oneShotAdd,
  scheduleAdd,
  templatePut,
  templateRemove,
  templateShow,
  templatesList as templateViews,
  triggerEnable,
  triggerRemove,
  triggerShow,
  triggersList as triggerViews,
  webhookAdd,
  webhookRotateSecret,
  type TemplateDetail,
  type TemplateView,
  type TickView,
  type TriggerView,
  type WebhookCreated,
} from './trigger-definitions.js';
import type { OpsContext } from './context.js';

/** The template and trigger verbs (docs/triggers.md); the logic is in ./trigger-definitions.ts. */

const who = (ctx: OpsContext) => ({ actor: ctx.actor, source: ctx.source });

/** `templates put FILE`: `file` is the run file's text. */
export async function templatesPut(ctx: OpsContext, p: { file: string; name?: string; maxConcurrentRuns?: number; dailyCeiling?: number }): Promise<TemplateView> {
  return templatePut(ctx.pool, { text: p.file, name: p.name, maxConcurrentRuns: p.maxConcurrentRuns, dailyCeiling: p.dailyCeiling, ...who(ctx) });
}

export async function templatesList(ctx: OpsContext): Promise<{ templates: TemplateView[] }> {
  return { templates: await templateViews(ctx.pool) };
}

export async function templatesShow(ctx: OpsContext, p: { name: string; version?: number }): Promise<TemplateDetail> {
  return templateShow(ctx.pool, p);
}

export async function templatesRemove(ctx: OpsContext, p: { name: string }): Promise<{ name: string; versions: number }> {
  return templateRemove(ctx.pool, { name: p.name, ...who(ctx) });
}

export async function triggersScheduleAdd(ctx: OpsContext, p: { template: string; cron: string; tz?: string; overlap?: string; catchUp?: string; set?: string[] }): Promise<TriggerView> {
  return scheduleAdd(ctx.pool, { template: p.template, cron: p.cron, tz: p.tz, overlap: p.overlap, catchUp: p.catchUp, sets: p.set, ...who(ctx) });
}

export async function triggersOnceAdd(ctx: OpsContext, p: { template: string; at: string; set?: string[] }): Promise<TriggerView> {
  return oneShotAdd(ctx.pool, { template: p.template, at: p.at, sets: p.set, ...who(ctx) });
}

/** The answer carries the signing secret: the only time anything shows it. */
export async function triggersWebhookAdd(ctx: OpsContext, p: { template: string; set?: string[]; map?: string[] }): Promise<WebhookCreated> {
  return webhookAdd(ctx.pool, { template: p.template, sets: p.set, maps: p.map, ownerTokenId: ctx.tokenId ?? null, ...who(ctx) });
}

/** `triggers webhook rotate ID`: a new secret owned by the caller; the answer carries it, once. */
export async function triggersWebhookRotate(ctx: OpsContext, p: { id: number }): Promise<WebhookCreated> {
  return webhookRotateSecret(ctx.pool, { id: p.id, ownerTokenId: ctx.tokenId ?? null, ...who(ctx) });
}

export async function triggersList(ctx: OpsContext): Promise<{ triggers: TriggerView[] }> {
  return { triggers: await triggerViews(ctx.pool) };
}

export async function triggersShow(ctx: OpsContext, p: { id: number; limit?: number }): Promise<TriggerView & { ticks: TickView[] }> {
  return triggerShow(ctx.pool, p);
}

export async function triggersEnable(ctx: OpsContext, p: { id: number }): Promise<TriggerView & { changed: boolean }> {
  return triggerEnable(ctx.pool, { id: p.id, enabled: true, ...who(ctx) });
}

export async function triggersDisable(ctx: OpsContext, p: { id: number }): Promise<TriggerView & { changed: boolean }> {
  return triggerEnable(ctx.pool, { id: p.id, enabled: false, ...who(ctx) });
}

export async function triggersRemove(ctx: OpsContext, p: { id: number }): Promise<{ id: number; kind: string }> {
  return triggerRemove(ctx.pool, { id: p.id, ...who(ctx) });
}

/** `admin reconcile`: wakes the leader's launch loop, every held launch checked again now. */
export async function adminReconcile(ctx: OpsContext): Promise<{ woken: true }> {
  return launchReconcile(ctx.pool, who(ctx));
}
