import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class TokensRevoke extends OpsCommand<typeof TokensRevoke> {
  static override args = { id: Args.string({ description: 'token id (tok_…)', required: true }) };
  static override description =
    'Revoke a token: every replica refuses it (401) from its next use. Idempotent: revoking a revoked token succeeds. With --runners, a registration token\'s runners are removed too: each gets `credential invalid` on its next call.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> tokens revoke tok_0a1b2c3d4e5f', '<%= config.bin %> tokens revoke tok_0a1b2c3d4e5f --runners'];
  static override flags = { runners: Flags.boolean({ description: 'also remove every runner that registered with this registration token' }) };
  static override summary = 'Revoke a token';

  async run(): Promise<OpsOutput<'tokensRevoke'>> {
    const { args } = await this.parse(TokensRevoke);
    const result = await (await this.ops()).tokensRevoke({ id: args.id, runners: this.flags.runners || undefined });
    if (!this.jsonEnabled()) {
      this.log(`revoked ${result.id}`);
      if (result.runnersRemoved) this.log(result.runnersRemoved.length ? `removed ${result.runnersRemoved.length} runner(s): ${result.runnersRemoved.map((r) => `${r.name} (${r.id})`).join(', ')}` : 'no runner registered with it');
    }
    return result;
  }
}
