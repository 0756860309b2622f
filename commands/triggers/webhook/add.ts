import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../../src/cli/base.js';
import type { WebhookCreated } from '../../../src/ops/domain/trigger-definitions.js';

export default class TriggersWebhookAdd extends OpsCommand<typeof TriggersWebhookAdd> {
  static override args = { template: Args.string({ description: 'template to start runs of', required: true }) };
  static override description = `Adds a signed webhook: every valid POST to its URL starts a run of the template. Prints the URL and the signing secret ONCE: no verb shows the secret again ('triggers webhook rotate' issues a new one). A webhook added with an API token answers only while that token is live.

Calls are signed with HMAC-SHA256 over "<timestamp>.<raw body>" (headers X-Opschain-Timestamp, X-Opschain-Signature: sha256=<hex>, optional X-Opschain-Delivery); see docs/triggers.md. The run finds the payload in the file named by $OPSCHAIN_WEBHOOK_PAYLOAD, and --map takes --set values from it.`;
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers webhook add deploy-web --map env.GIT_REF=$.ref --map env.COMMIT=$.head_commit.id'];
  static override flags = {
    map: Flags.string({ description: 'KEY=$.path: set KEY of the run file from the JSON payload (repeatable)', multiple: true, default: [] }),
    set: Flags.string({ description: 'override a key of the template for these runs (repeatable)', multiple: true, default: [] }),
    url: Flags.string({ description: 'the server URL senders reach (default: --server, else the local server\'s)' }),
  };
  static override summary = 'Add a signed webhook';

  async run(): Promise<WebhookCreated & { url: string }> {
    const { args, flags } = await this.parse(TriggersWebhookAdd);
    const t = await (await this.ops()).triggersWebhookAdd({ template: args.template, set: flags.set, map: flags.map });
    const base = (flags.url ?? this.flags.server ?? this.localServerUrl() ?? '').replace(/\/+$/, '');
    const url = `${base}${t.path}`;
    if (!this.jsonEnabled()) {
      this.log(`trigger ${t.id}: webhook of ${t.template}`);
      this.log(`url:    ${url}`);
      this.log(`secret: ${t.secret}`);
      this.log('(the secret is shown only now: keep it with the sender)');
    }
    return { ...t, url };
  }
}
