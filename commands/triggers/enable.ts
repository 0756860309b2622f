import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { cliActor } from '../../src/cli/runs.js';
import { parseTriggerId, triggerEnable, type TriggerView } from '../../src/triggers/manage.js';

export default class TriggersEnable extends BaseCommand<typeof TriggersEnable> {
  static override args = { id: Args.string({ description: 'trigger id', required: true }) };
  static override description = 'Enables a trigger. A schedule starts again from its next tick after now: the ticks of the time it was off are not fired. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers enable 12'];
  static override summary = 'Enable a trigger';

  async run(): Promise<TriggerView & { changed: boolean }> {
    const { args } = await this.parse(TriggersEnable);
    const t = await triggerEnable(await this.store(), { id: parseTriggerId(args.id), enabled: true, actor: cliActor() });
    if (!this.jsonEnabled()) this.log(`trigger ${t.id} ${t.changed ? 'enabled' : 'was already enabled'}`);
    return t;
  }
}
