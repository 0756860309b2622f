import type { Pool, PoolClient } from './pool.js';

export interface AuditEntry { actor: string; action: string; target?: string; source?: string; detail?: Record<string, unknown> }

export async function auditRecord(db: Pool | PoolClient, e: AuditEntry): Promise<void> {
  await db.query(`INSERT INTO audit_log (actor, action, target, source, detail) VALUES ($1, $2, $3, $4, $5)`, [
    e.actor,
    e.action,
    e.target ?? null,
    e.source ?? null,
    JSON.stringify(e.detail ?? {}),
  ]);
}
