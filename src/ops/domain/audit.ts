import { parseDuration } from '../../core/duration.js';
import { Invalid } from '../../errors.js';
import { auditList, type AuditRow } from '../../store/audit.js';
import type { OpsContext } from './context.js';

export interface AuditEntryJson { id: number; at: Date; actor: string; action: string; target: string | null; source: string | null; reason: string | null; detail: Record<string, unknown> }
export interface AuditView { entries: AuditEntryJson[]; limit: number; more: boolean }

/** `--since`: a span back from now (`30m`, `7d`) or an ISO time. */
export function parseSince(text: string): { sinceMs: number } | { sinceAt: Date } {
  const ms = parseDuration(text);
  if (ms !== undefined && ms > 0) return { sinceMs: ms };
  if (/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}))?$/.test(text.trim())) {
    const at = new Date(text.trim());
    if (!Number.isNaN(at.getTime())) return { sinceAt: at };
  }
  throw new Invalid(`--since: expected a span back from now (30m, 24h, 7d) or an ISO time (2026-12-01T09:00:00Z), got ${JSON.stringify(text)}`);
}

const entry = (r: AuditRow): AuditEntryJson => ({
  id: r.id,
  at: r.at,
  actor: r.actor,
  action: r.action,
  target: r.target,
  source: r.source,
  reason: typeof r.detail.reason === 'string' ? r.detail.reason : null,
  detail: r.detail,
});

/** `admin audit`: every lever, token and policy change, newest first, since a time and for an actor. */
export async function adminAudit(ctx: OpsContext, p: { since?: string; actor?: string; limit?: number }): Promise<AuditView> {
  const limit = p.limit ?? 200;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) throw new Invalid(`--limit: expected 1 to 10000, got ${limit}`);
  if (p.actor !== undefined && (!p.actor.trim() || p.actor.length > 200)) throw new Invalid('--actor: expected a name (part of an actor, e.g. alice or ci-deploy)');
  const since = p.since === undefined ? {} : parseSince(p.since);
  const rows = await auditList(ctx.pool, { ...since, actor: p.actor, limit: limit + 1 });
  return { entries: rows.slice(0, limit).map(entry), limit, more: rows.length > limit };
}
