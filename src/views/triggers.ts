import type { TemplateView, TickView, TriggerView } from '../ops/domain/trigger-definitions.js';

/** Table rows of `templates list`, `triggers list` and the tick history of `triggers show`. */

export const TEMPLATE_HEAD = ['template', 'version', 'max concurrent', 'daily ceiling', 'updated', 'by'];

export function templateRows(list: TemplateView[]): string[][] {
  return list.map((t) => [t.name, `v${t.version}`, t.maxConcurrentRuns === null ? '-' : String(t.maxConcurrentRuns), t.dailyCeiling === null ? '-' : String(t.dailyCeiling), t.createdAt, t.createdBy ?? '-']);
}

export const TRIGGER_HEAD = ['id', 'kind', 'template', 'when', 'next due', 'policies', 'enabled'];

export function triggerWhen(t: TriggerView): string {
  if (t.kind === 'schedule') return `${t.cron}${t.tz && t.tz !== 'UTC' ? ` (${t.tz})` : ''}`;
  if (t.kind === 'once') return t.status === 'fired' ? 'once (fired)' : 'once';
  return `POST ${t.path}`;
}

export function triggerRows(list: TriggerView[]): string[][] {
  return list.map((t) => [
    String(t.id),
    t.kind,
    t.template,
    triggerWhen(t),
    t.nextDueAt ?? '-',
    t.kind === 'schedule' ? `overlap ${t.overlap}, catch-up ${t.catchUp}` : '-',
    t.enabled ? 'yes' : 'no',
  ]);
}

/** Who a webhook answers for: its owner token and whether the webhook still answers. */
export function webhookOwner(owner: TriggerView['owner']): string {
  if (!owner) return 'none (added with the store\'s URL; answers until removed or disabled)';
  const who = `token ${owner.name ?? '?'} (${owner.tokenId})`;
  if (owner.state === 'live') return `${who}, live`;
  const what = owner.state === 'unknown' ? 'no longer exists' : owner.state;
  return `${who}, ${what}: the webhook answers 401 until an admin runs 'opschain triggers webhook rotate'`;
}

export const TICK_HEAD = ['tick', 'due', 'outcome', 'run', 'detail'];

/** What happened to one tick, in words: deferred and when it fired, missed and what catch-up did. */
export function tickDetail(t: TickView): string {
  const parts: string[] = [];
  if (t.deferredReason) parts.push(`${t.outcome === 'pending' ? 'deferred' : 'was deferred'} since ${t.deferredAt}: ${t.deferredReason}`);
  if (t.outcome === 'fired' && t.firedAt) parts.push(`fired ${t.firedAt}`);
  if (t.missed && t.catchUp) parts.push(`missed; catch-up ${t.catchUp}`);
  else if (t.missed) parts.push('missed; catch-up decided on resume');
  if (t.detail) parts.push(t.detail);
  // The sender's own delivery id when it sent one; else the stored delivery's number.
  if (t.deliveryKey && !t.deliveryKey.startsWith('sig-')) parts.push(`delivery ${t.deliveryKey}`);
  else if (t.deliveryId !== null) parts.push(`delivery #${t.deliveryId}`);
  return parts.join('; ');
}

export function tickRows(ticks: TickView[]): string[][] {
  return ticks.map((t) => [String(t.id), t.dueAt, t.outcome, t.runId === null ? '-' : String(t.runId), tickDetail(t)]);
}
