import { identifierProblem, oneLine } from '../../core/bounds.js';
import { parseDuration } from '../../core/duration.js';
import { SCOPES, type Scope } from '../../core/tokens.js';
import { Invalid, NotFound } from '../../errors.js';
import { auditRecord } from '../../store/audit.js';
import { withTransaction } from '../../store/pool.js';
import { runnersRemove } from '../../store/runners.js';
import { tokenCreate, tokenList, tokenRevoke, type TokenRow } from '../../store/tokens.js';
import type { OpsContext } from './context.js';

export interface TokenCreated { id: string; kind: 'admin' | 'registration'; name: string; scope: Scope | null; groups: string[]; expiresAt: Date | null; secret: string }

/** The most groups one registration token may name. */
export const TOKEN_MAX_GROUPS = 64;

/** A group name as a runner registers with it: no edge spaces, no control characters (C1 included). */
function groupName(value: unknown): string {
  // eslint-disable-next-line no-control-regex
  if (typeof value !== 'string' || !value.trim() || value !== value.trim() || value.length > 128 || /[\u0000-\u001f\u007f-\u009f]/.test(value)) {
    throw new Invalid(`--group ${JSON.stringify(value)}: expected a group name (at most 128 characters, no edge spaces or control characters)`);
  }
  return value;
}

/**
 * `tokens create`: an API token with a scope (`read`, `runs`, `levers`, `admin`) or a runner
 * registration token, optionally naming the groups its runners may register into (without any,
 * only groups that are not exclusive), optionally expiring (`30d`). The secret is returned once;
 * the store keeps its hash. The token and its audit row commit together.
 */
export async function tokensCreate(ctx: OpsContext, p: { kind: 'admin' | 'registration'; name: string; scope?: Scope; groups?: string[]; expires?: string }): Promise<TokenCreated> {
  if (p.kind !== 'admin' && p.kind !== 'registration') throw new Invalid(`kind ${JSON.stringify(p.kind)}: expected admin or registration`);
  if (typeof p.name !== 'string' || !p.name.trim() || p.name.length > 200) throw new Invalid('--name: expected a non-empty label (at most 200 characters)');
  // A token's name is shown in lists, audit actors and refusals: nothing in it may be obeyed by a terminal.
  const problem = identifierProblem(p.name);
  if (problem) throw new Invalid(`--name "${oneLine(p.name)}": ${problem}; expected a label without control characters`);
  if (p.scope !== undefined && !SCOPES.includes(p.scope)) throw new Invalid(`--scope ${p.scope}: expected one of ${SCOPES.join(', ')}`);
  if (p.kind === 'registration' && p.scope !== undefined) throw new Invalid('--scope: registration tokens register runners and carry no scope');
  if (p.groups !== undefined && !Array.isArray(p.groups)) throw new Invalid('--group: expected a list of group names');
  const groups = (p.groups ?? []).map(groupName);
  if (groups.length && p.kind !== 'registration') throw new Invalid('--group: only a registration token names the groups its runners may join');
  if (groups.length > TOKEN_MAX_GROUPS) throw new Invalid(`--group: at most ${TOKEN_MAX_GROUPS} groups on one token, got ${groups.length}`);
  let expiresInMs: number | null = null;
  if (p.expires !== undefined) {
    const ms = parseDuration(p.expires);
    if (ms === undefined || ms <= 0) throw new Invalid(`--expires ${p.expires}: expected a duration like 30d, 12h or 90m`);
    expiresInMs = ms;
  }
  return withTransaction(ctx.pool, async (client) => {
    const { token, secret } = await tokenCreate(client, { kind: p.kind, name: p.name, scope: p.scope, groups, createdBy: ctx.actor, expiresInMs });
    await auditRecord(client, { actor: ctx.actor, action: 'tokens.create', target: token.id, source: ctx.source, detail: { kind: token.kind, name: token.name, scope: token.scope, groups: token.groups, expiresAt: token.expiresAt } });
    return { id: token.id, kind: token.kind, name: token.name, scope: token.scope, groups: token.groups, expiresAt: token.expiresAt, secret };
  });
}

/** `tokens list`: never the secrets. */
export async function tokensList(ctx: OpsContext): Promise<{ tokens: TokenRow[] }> {
  return { tokens: await tokenList(ctx.pool) };
}

/**
 * `tokens revoke ID [--runners]`: idempotent; every replica refuses the token from its next use.
 * With `runners`, the runners that registered with this registration token are removed too, their
 * credentials refused from their next call. The token, the runners and the audit row commit together.
 */
export async function tokensRevoke(ctx: OpsContext, p: { id: string; runners?: boolean }): Promise<{ id: string; revokedAt: Date; runnersRemoved?: Array<{ id: string; name: string }> }> {
  if (typeof p.id !== 'string' || !/^tok_[0-9a-f]{1,64}$/.test(p.id)) throw new Invalid(`token id ${JSON.stringify(p.id)}: expected tok_ and hex digits (see opschain tokens list)`);
  return withTransaction(ctx.pool, async (client) => {
    const token = await tokenRevoke(client, p.id);
    if (!token) throw new NotFound(`no token with id ${p.id}`);
    if (p.runners && token.kind !== 'registration') throw new Invalid(`--runners: ${token.id} is an API token; only a registration token has runners`);
    const removed = p.runners ? await runnersRemove(client, { registrationTokenId: token.id }) : undefined;
    await auditRecord(client, { actor: ctx.actor, action: 'tokens.revoke', target: token.id, source: ctx.source, detail: removed ? { runners: removed.map((r) => r.id) } : {} });
    return { id: token.id, revokedAt: token.revokedAt!, ...(removed ? { runnersRemoved: removed } : {}) };
  });
}
