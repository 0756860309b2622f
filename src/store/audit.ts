import type { Db } from './pool.js';

export interface AuditEntry { actor: string; action: string; target?: string; source?: string; detail?: Record<string, unknown> }

export async function auditRecord(db: Db, e: AuditEntry): Promise<void> {
  await db.query(`INSERT INTO audit_log (actor, action, target, source, detail) VALUES ($1, $2, $3, $4, $5)`, [
    e.actor,
    e.action,
    e.target ?? null,
    e.source ?? null,
    JSON.stringify(e.detail ?? {}),
  ]);
}

export interface AuditRow { id: number; at: Date; actor: string; action: string; target: string | null; source: string | null; detail: Record<string, unknown> }

/**
 * The audit log newest first: since a time (or a span back from the store's clock), for actors
 * containing a text (case-insensitive), at most `limit` rows. Index-backed on `at`, or on actor.
 */
export async function auditList(db: Db, p: { sinceAt?: Date; sinceMs?: number; actor?: string; limit: number }): Promise<AuditRow[]> {
  const actor = p.actor === undefined ? null : `%${p.actor.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const { rows } = await db.query(
    `SELECT id, at, actor, action, target, source, detail FROM audit_log
      WHERE at >= coalesce($1::timestamptz, now() - $2::bigint * interval '1 millisecond', '-infinity')
        AND ($3::text IS NULL OR actor ILIKE $3)
      ORDER BY at DESC, id DESC LIMIT $4`,
    [p.sinceAt ?? null, p.sinceMs ?? null, actor, p.limit],
  );
  return rows.map((r) => ({ id: Number(r.id), at: r.at, actor: r.actor, action: r.action, target: r.target, source: r.source, detail: r.detail ?? {} }));
}
