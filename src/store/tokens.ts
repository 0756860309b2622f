import { randomBytes } from 'node:crypto';
import { hashSecret, newSecret, secretMatches, type Scope, type TokenKind } from '../core/tokens.js';
import type { Db } from './pool.js';

export interface TokenRow {
  id: string;
  kind: 'admin' | 'registration';
  name: string;
  /** What an API (`admin`-kind) token may do; null for registration tokens. */
  scope: Scope | null;
  /**
   * The runner groups a registration token may register into, sorted; empty when it names none
   * (then only groups that are not exclusive), and for API tokens.
   */
  groups: string[];
  createdBy: string | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  expiresAt: Date | null;
  revokedAt: Date | null;
}
const mapToken = (r: any): TokenRow => ({
  id: r.id,
  kind: r.kind,
  name: r.name,
  scope: r.scope ?? null,
  groups: r.groups ?? [],
  createdBy: r.created_by ?? null,
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  expiresAt: r.expires_at ?? null,
  revokedAt: r.revoked_at,
});

/** Creates a token; the secret is returned once and only its hash is stored. `expiresInMs` counts from the store's now(). */
export async function tokenCreate(
  db: Db,
  p: { kind: 'admin' | 'registration'; name: string; scope?: Scope; groups?: string[]; createdBy?: string | null; expiresInMs?: number | null },
): Promise<{ token: TokenRow; secret: string }> {
  const scope = p.kind === 'admin' ? (p.scope ?? 'admin') : null;
  const secret = newSecret(p.kind as TokenKind, scope ?? undefined);
  const id = `tok_${randomBytes(6).toString('hex')}`;
  const groups = p.groups?.length ? [...new Set(p.groups)].sort() : null;
  const { rows } = await db.query(
    `INSERT INTO tokens (id, kind, name, hash, scope, created_by, expires_at, groups)
     VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::bigint IS NULL THEN NULL ELSE now() + $7::bigint * interval '1 millisecond' END, $8::text[])
     RETURNING *`,
    [id, p.kind, p.name, hashSecret(secret), scope, p.createdBy ?? null, p.expiresInMs ?? null, groups],
  );
  return { token: mapToken(rows[0]), secret };
}

export async function tokenList(db: Db): Promise<TokenRow[]> {
  const { rows } = await db.query(`SELECT * FROM tokens ORDER BY created_at, id`);
  return rows.map(mapToken);
}

export async function tokenRevoke(db: Db, id: string): Promise<TokenRow | undefined> {
  const { rows } = await db.query(`UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING *`, [id]);
  return rows[0] ? mapToken(rows[0]) : undefined;
}

export type TokenCheck = { ok: true; token: TokenRow } | { ok: false; reason: 'unknown' | 'revoked' | 'expired'; token?: TokenRow };

/**
 * Looks a presented secret up by its hash (compared again in constant time) and says whether it is
 * live by the store's clock, so every replica agrees the moment a token is revoked or expires.
 * A live token's last use is recorded in the same statement. `now`, when given, stands for the
 * store's clock (tests set the time).
 */
export async function tokenCheck(db: Db, kind: 'admin' | 'registration', secret: string, p: { now?: Date } = {}): Promise<TokenCheck> {
  const { rows } = await db.query(
    `WITH t AS (SELECT id, (revoked_at IS NOT NULL) AS revoked, (expires_at IS NOT NULL AND expires_at <= coalesce($3::timestamptz, now())) AS expired
                  FROM tokens WHERE hash = $1 AND kind = $2)
     UPDATE tokens SET last_used_at = CASE WHEN t.revoked OR t.expired THEN tokens.last_used_at ELSE coalesce($3::timestamptz, now()) END
       FROM t WHERE tokens.id = t.id
     RETURNING tokens.*, t.revoked, t.expired`,
    [hashSecret(secret), kind, p.now ?? null],
  );
  const r = rows[0];
  if (!r || !secretMatches(secret, r.hash)) return { ok: false, reason: 'unknown' };
  const token = mapToken(r);
  if (r.revoked) return { ok: false, reason: 'revoked', token };
  if (r.expired) return { ok: false, reason: 'expired', token };
  return { ok: true, token };
}

/** The live token of this kind whose hash matches, or undefined. */
export async function tokenVerify(db: Db, kind: 'admin' | 'registration', secret: string): Promise<TokenRow | undefined> {
  const check = await tokenCheck(db, kind, secret);
  return check.ok ? check.token : undefined;
}
