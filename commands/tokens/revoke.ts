import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { NotFoundError } from '../../src/cli/errors.js';
import { auditRecord } from '../../src/store/audit.js';
import { tokenRevoke } from '../../src/store/tokens.js';

export default class TokensRevoke extends BaseCommand<typeof TokensRevoke> {
  static override args = { id: Args.string({ description: 'token id (tok_…)', required: true }) };
  static override description = 'Revoke a token. Idempotent: revoking a revoked token succeeds.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> tokens revoke tok_0a1b2c3d4e5f'];
  static override summary = 'Revoke a token';

  async run(): Promise<{ id: string; revokedAt: string }> {
    const { args } = await this.parse(TokensRevoke);
    const pool = await this.store();
    const token = await tokenRevoke(pool, args.id);
    if (!token) throw new NotFoundError(`no token with id ${args.id}`);
    await auditRecord(pool, { actor: 'cli', action: 'tokens.revoke', target: token.id });
    if (!this.jsonEnabled()) this.log(`revoked ${token.id}`);
    return { id: token.id, revokedAt: token.revokedAt!.toISOString() };
  }
}
