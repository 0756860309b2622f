import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { cliActor } from '../../src/cli/runs.js';
import { parseTriggerId, triggerEnable, type TriggerView } from '../../src/triggers/manage.js';

export default class TriggersDisable extends BaseCommand<typeof TriggersDisable> {
  static override args = { id: Args.string({ description: 'trigger id', required: true }) };
  static override description = 'Disables a trigger: a schedule stops ticking, a pending one-shot waits, a webhook refuses calls (404) and its pending deliveries are settled. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers disable 12'];
  static override summary = 'Disable a trigger';

  async run(): Promise<TriggerView & { changed: boolean }> {
    const { args } = await this.parse(TriggersDisable);
    const t = await triggerEnable(await this.store(), { id: parseTriggerId(args.id), enabled: false, actor: cliActor() });
    if (!this.jsonEnabled()) this.log(`trigger ${t.id} ${t.changed ? 'disabled' : 'was already disabled'}`);
    return t;
  }
}
