import { randomBytes } from 'node:crypto';
import { hashSecret, newSecret, secretMatches, type TokenKind } from '../core/tokens.js';
import type { Pool } from './pool.js';

export interface TokenRow { id: string; kind: 'admin' | 'registration'; name: string; createdAt: Date; lastUsedAt: Date | null; revokedAt: Date | null }
const mapToken = (r: any): TokenRow => ({ id: r.id, kind: r.kind, name: r.name, createdAt: r.created_at, lastUsedAt: r.last_used_at, revokedAt: r.revoked_at });

/** Creates a token; the secret is returned once and only its hash is stored. */
export async function tokenCreate(pool: Pool, p: { kind: 'admin' | 'registration'; name: string }): Promise<{ token: TokenRow; secret: string }> {
  const secret = newSecret(p.kind as TokenKind);
  const id = `tok_${randomBytes(6).toString('hex')}`;
  const { rows } = await pool.query(`INSERT INTO tokens (id, kind, name, hash) VALUES ($1, $2, $3, $4) RETURNING *`, [id, p.kind, p.name, hashSecret(secret)]);
  return { token: mapToken(rows[0]), secret };
}

export async function tokenList(pool: Pool): Promise<TokenRow[]> {
  const { rows } = await pool.query(`SELECT * FROM tokens ORDER BY created_at, id`);
  return rows.map(mapToken);
}

export async function tokenRevoke(pool: Pool, id: string): Promise<TokenRow | undefined> {
  const { rows } = await pool.query(`UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING *`, [id]);
  return rows[0] ? mapToken(rows[0]) : undefined;
}

/** The live token of this kind whose hash matches, or undefined. */
export async function tokenVerify(pool: Pool, kind: 'admin' | 'registration', secret: string): Promise<TokenRow | undefined> {
  const hash = hashSecret(secret);
  const { rows } = await pool.query(
    `UPDATE tokens SET last_used_at = now() WHERE hash = $1 AND kind = $2 AND revoked_at IS NULL RETURNING *, hash`,
    [hash, kind],
  );
  if (!rows[0] || !secretMatches(secret, rows[0].hash)) return undefined;
  return mapToken(rows[0]);
}
