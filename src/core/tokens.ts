import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Prefixes let secret scanners recognise a leaked opschain secret by its shape. */
export const TOKEN_PREFIX = { admin: 'ocadm_', registration: 'ocreg_', runner: 'ocrnr_' } as const;
export type TokenKind = keyof typeof TOKEN_PREFIX;

/**
 * An API token's prefix names its scope, so a `read` token does not look like an admin one in a
 * CI variable or a scanner's report. Only a label: the scope that counts is the stored one, and
 * `ocadm_` (every API token made before these prefixes) stays accepted whatever its scope.
 */
export const SCOPE_PREFIX = { read: 'ocread_', runs: 'ocruns_', levers: 'oclevers_', admin: 'ocadm_' } as const;

export function newSecret(kind: TokenKind, scope?: Scope): string {
  const prefix = kind === 'admin' && scope ? SCOPE_PREFIX[scope] : TOKEN_PREFIX[kind];
  return prefix + randomBytes(24).toString('base64url');
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function secretKind(secret: string): TokenKind | undefined {
  if (Object.values(SCOPE_PREFIX).some((p) => secret.startsWith(p))) return 'admin';
  return (Object.keys(TOKEN_PREFIX) as TokenKind[]).find((k) => secret.startsWith(TOKEN_PREFIX[k]));
}

/** Constant-time equality of a presented secret against a stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * What an API token may do. `read` is every GET; `runs` adds submit, retry and cancel; `levers`
 * adds drain, undrain, quiesce and resume; `admin` is everything (tokens, pools, placement, halt).
 */
export const SCOPES = ['read', 'runs', 'levers', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** Whether a token of scope `held` may use a route that needs `needed`. */
export function scopeAllows(held: Scope, needed: Scope): boolean {
  if (held === 'admin' || held === needed) return true;
  return needed === 'read';
}

/**
 * Why a registration token may not register a runner into `group`, or undefined when it may. A
 * token that names groups registers only into those (a runner with no group included); one that
 * names none joins any group that is not exclusive, or no group. An exclusive group is a trust
 * boundary (its steps and their env go only to its runners), so joining it takes a token issued
 * for it.
 */
export function registrationRefusal(p: { token: string; tokenGroups: readonly string[]; group: string | null; exclusive: boolean }): string | undefined {
  const named = p.tokenGroups.length > 0;
  if (named && (p.group === null || !p.tokenGroups.includes(p.group))) {
    const where = p.group === null ? 'a runner without a group' : `group ${p.group}`;
    return `registration token ${p.token} may register runners only into ${p.tokenGroups.join(', ')}, not ${where}`;
  }
  if (!named && p.group !== null && p.exclusive) {
    return `group ${p.group} is exclusive: registration token ${p.token} names no groups; register with a token created with --group ${p.group}`;
  }
  return undefined;
}
