import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class TokensRevoke extends OpsCommand<typeof TokensRevoke> {
  static override args = { id: Args.string({ description: 'token id (tok_…)', required: true }) };
  static override description = 'Revoke a token: every replica refuses it (401) from its next use. Idempotent: revoking a revoked token succeeds.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> tokens revoke tok_0a1b2c3d4e5f'];
  static override summary = 'Revoke a token';

  async run(): Promise<OpsOutput<'tokensRevoke'>> {
    const { args } = await this.parse(TokensRevoke);
    const result = await (await this.ops()).tokensRevoke({ id: args.id });
    if (!this.jsonEnabled()) this.log(`revoked ${result.id}`);
    return result;
  }
}
