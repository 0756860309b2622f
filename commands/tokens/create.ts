import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { UserError } from '../../src/cli/errors.js';
import { auditRecord } from '../../src/store/audit.js';
import { tokenCreate } from '../../src/store/tokens.js';

export default class TokensCreate extends BaseCommand<typeof TokensCreate> {
  static override description = 'Create an admin token or a runner registration token. The secret is printed once; only its hash is stored.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> tokens create --registration --name build-fleet', '<%= config.bin %> tokens create --admin --name ci --json'];
  static override flags = {
    admin: Flags.boolean({ description: 'an admin token (admin API, lever verbs over HTTP)', exclusive: ['registration'] }),
    name: Flags.string({ description: 'a label to recognise the token by', default: 'unnamed' }),
    registration: Flags.boolean({ description: 'a runner registration token', exclusive: ['admin'] }),
  };
  static override summary = 'Create a token';

  async run(): Promise<{ id: string; kind: string; name: string; secret: string }> {
    if (!this.flags.admin && !this.flags.registration) throw new UserError('say which kind: --admin or --registration');
    const kind = this.flags.admin ? 'admin' : 'registration';
    const pool = await this.store();
    const { token, secret } = await tokenCreate(pool, { kind, name: this.flags.name });
    await auditRecord(pool, { actor: 'cli', action: 'tokens.create', target: token.id, detail: { kind, name: token.name } });
    if (!this.jsonEnabled()) {
      this.log(secret);
      this.logToStderr(`${kind} token ${token.id} (${token.name}) created; the secret above is shown only once`);
    }
    return { id: token.id, kind, name: token.name, secret };
  }
}
