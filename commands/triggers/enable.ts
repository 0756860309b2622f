import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parseTriggerId, type TriggerView } from '../../src/ops/domain/trigger-definitions.js';

export default class TriggersEnable extends OpsCommand<typeof TriggersEnable> {
  static override args = { id: Args.string({ description: 'trigger id', required: true }) };
  static override description = 'Enables a trigger. A schedule starts again from its next tick after now: the ticks of the time it was off are not fired. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers enable 12'];
  static override summary = 'Enable a trigger';

  async run(): Promise<TriggerView & { changed: boolean }> {
    const { args } = await this.parse(TriggersEnable);
    const t = await (await this.ops()).triggersEnable({ id: parseTriggerId(args.id) });
    if (!this.jsonEnabled()) this.log(`trigger ${t.id} ${t.changed ? 'enabled' : 'was already enabled'}`);
    return t;
  }
}
