import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parseTriggerId, type TriggerView } from '../../src/ops/domain/trigger-definitions.js';

export default class TriggersDisable extends OpsCommand<typeof TriggersDisable> {
  static override args = { id: Args.string({ description: 'trigger id', required: true }) };
  static override description = 'Disables a trigger: a schedule stops ticking, a pending one-shot waits, a webhook refuses calls (404) and its pending deliveries are settled. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers disable 12'];
  static override summary = 'Disable a trigger';

  async run(): Promise<TriggerView & { changed: boolean }> {
    const { args } = await this.parse(TriggersDisable);
    const t = await (await this.ops()).triggersDisable({ id: parseTriggerId(args.id) });
    if (!this.jsonEnabled()) this.log(`trigger ${t.id} ${t.changed ? 'disabled' : 'was already disabled'}`);
    return t;
  }
}
