import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { tokenList, type TokenRow } from '../../src/store/tokens.js';

export default class TokensList extends BaseCommand<typeof TokensList> {
  static override description = 'List tokens (never their secrets).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> tokens list --json'];
  static override summary = 'List tokens';

  async run(): Promise<{ tokens: TokenRow[] }> {
    const tokens = await tokenList(await this.store());
    if (!this.jsonEnabled()) {
      const table = new Table({ head: ['id', 'kind', 'name', 'created', 'last used', 'revoked'] });
      for (const t of tokens) table.push([t.id, t.kind, t.name, t.createdAt.toISOString(), t.lastUsedAt?.toISOString() ?? '', t.revokedAt?.toISOString() ?? '']);
      this.log(table.toString());
    }
    return { tokens };
  }
}
