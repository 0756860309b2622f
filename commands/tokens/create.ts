import { Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { SCOPES } from '../../src/core/tokens.js';
import { Invalid } from '../../src/errors.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class TokensCreate extends OpsCommand<typeof TokensCreate> {
  static override description = `Create an API token with a scope, or a runner registration token. The secret is printed once; only its hash is stored.

Scopes: read (every GET), runs (read + submit, retry, cancel), levers (read + drain, undrain, quiesce, resume), admin (everything, including tokens, pools, placement and halt). A token used outside its scope gets 403 naming the scope it lacks; an expired or revoked one gets 401.

A registration token names the groups its runners may register into with --group (repeatable); it then registers runners only into those. One without --group may join only groups that are not exclusive: registering into an exclusive group with it gets 403 naming the group.`;
  static override enableJsonFlag = true;
  static override examples = [
    '<%= config.bin %> tokens create --name ci-deploy --scope levers --expires 30d',
    '<%= config.bin %> tokens create --registration --name build-fleet',
    '<%= config.bin %> tokens create --registration --name prod-fleet --group prod --group prod-eu',
    '<%= config.bin %> tokens create --name ops --scope admin --json',
  ];
  static override flags = {
    admin: Flags.boolean({ description: 'an admin-scoped API token (same as --scope admin)', exclusive: ['registration', 'scope'] }),
    expires: Flags.string({ description: 'expire after this long, e.g. 30d, 12h (default: never)' }),
    group: Flags.string({ description: 'a group its runners may register into (repeatable; needed for an exclusive group)', multiple: true, dependsOn: ['registration'] }),
    name: Flags.string({ description: 'a label to recognise the token by', default: 'unnamed' }),
    registration: Flags.boolean({ description: 'a runner registration token', exclusive: ['admin', 'scope'] }),
    scope: Flags.string({ description: 'what an API token may do', options: [...SCOPES] }),
  };
  static override summary = 'Create a token';

  async run(): Promise<OpsOutput<'tokensCreate'>> {
    const f = this.flags;
    if (!f.admin && !f.registration && !f.scope) throw new Invalid('say which token: --scope read|runs|levers|admin, or --registration', 'usage');
    const kind = f.registration ? 'registration' : 'admin';
    const scope = f.registration ? undefined : f.admin ? 'admin' : (f.scope as (typeof SCOPES)[number]);
    const created = await (await this.ops()).tokensCreate({ kind, name: f.name, scope, groups: f.group, expires: f.expires });
    if (!this.jsonEnabled()) {
      this.log(created.secret);
      const what = created.kind === 'registration' ? `registration token${created.groups.length ? ` for group ${created.groups.join(', ')}` : ''}` : `${created.scope}-scoped API token`;
      this.logToStderr(`${what} ${created.id} (${created.name}) created${created.expiresAt ? `, expires ${created.expiresAt}` : ''}; the secret above is shown only once`);
    }
    return created;
  }
}
