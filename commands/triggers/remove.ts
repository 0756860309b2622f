import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parseTriggerId } from '../../src/ops/domain/trigger-definitions.js';

export default class TriggersRemove extends OpsCommand<typeof TriggersRemove> {
  static override args = { id: Args.string({ description: 'trigger id', required: true }) };
  static override description = 'Removes a trigger (a webhook with its deliveries). Its tick history stays until the retention prunes it; runs it started are untouched.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers remove 12'];
  static override summary = 'Remove a trigger';

  async run(): Promise<{ id: number; kind: string }> {
    const { args } = await this.parse(TriggersRemove);
    const r = await (await this.ops()).triggersRemove({ id: parseTriggerId(args.id) });
    if (!this.jsonEnabled()) this.log(`trigger ${r.id} (${r.kind}) removed`);
    return r;
  }
}
