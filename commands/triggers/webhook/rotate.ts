import { Args } from '@oclif/core';
import { OpsCommand } from '../../../src/cli/base.js';
import { parseTriggerId, type WebhookCreated } from '../../../src/ops/domain/trigger-definitions.js';
import { webhookOwner } from '../../../src/views/triggers.js';

export default class TriggersWebhookRotate extends OpsCommand<typeof TriggersWebhookRotate> {
  static override args = { id: Args.string({ description: 'webhook trigger id', required: true }) };
  static override description = `Issues a new signing secret for a webhook, owned by the caller's token (admin scope over HTTP; with the store's URL, owned by no token). The old secret is refused from now on. A webhook answers only while the token that created it is live: this is how an admin brings back one whose owner token was revoked or expired. Prints the secret ONCE.`;
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers webhook rotate 4', '<%= config.bin %> triggers webhook rotate 4 --server https://ops.example --token $ADMIN_TOKEN --json'];
  static override summary = 'Issue a new secret for a webhook, owned by the caller';

  async run(): Promise<WebhookCreated> {
    const { args } = await this.parse(TriggersWebhookRotate);
    const t = await (await this.ops()).triggersWebhookRotate({ id: parseTriggerId(args.id) });
    if (!this.jsonEnabled()) {
      this.log(`trigger ${t.id}: webhook of ${t.template}, new secret`);
      this.log(`owner:  ${webhookOwner(t.owner)}`);
      this.log(`secret: ${t.secret}`);
      this.log('(the secret is shown only now: give it to the sender; the old one is refused from now on)');
    }
    return t;
  }
}
