import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class TokensList extends OpsCommand<typeof TokensList> {
  static override description = 'List tokens (never their secrets): kind, scope, the groups a registration token may register runners into (none: only groups that are not exclusive), who created it, when it was last used, when it expires or was revoked.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> tokens list', '<%= config.bin %> tokens list --json'];
  static override summary = 'List tokens';

  async run(): Promise<OpsOutput<'tokensList'>> {
    const result = await (await this.ops()).tokensList({});
    if (!this.jsonEnabled()) {
      const t = table(['id', 'kind', 'name', 'scope', 'groups', 'created by', 'created', 'last used', 'expires', 'revoked']);
      for (const k of result.tokens) {
        t.push([k.id, k.kind === 'admin' ? 'api' : k.kind, k.name, k.scope ?? '', k.groups.join(', '), k.createdBy ?? '', k.createdAt, k.lastUsedAt ?? 'never', k.expiresAt ?? 'never', k.revokedAt ?? '']);
      }
      this.log(t.toString());
    }
    return result;
  }
}
