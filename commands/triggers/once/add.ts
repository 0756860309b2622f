import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../../src/cli/base.js';
import type { TriggerView } from '../../../src/ops/domain/trigger-definitions.js';

export default class TriggersOnceAdd extends OpsCommand<typeof TriggersOnceAdd> {
  static override args = { template: Args.string({ description: 'template to start a run of', required: true }) };
  static override description = 'Adds a one-shot: one run of the template at --at, an ISO time with its zone (2026-12-02T02:00:00Z), now, or +DURATION from now (+90s, +2h). It fires on the dot, from whichever replica leads.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers once add db-maintenance --at 2026-12-02T02:00:00Z', '<%= config.bin %> triggers once add smoke --at +10m --set env.TARGET=canary'];
  static override flags = {
    at: Flags.string({ description: 'when: ISO time with zone, now, or +DURATION', required: true }),
    set: Flags.string({ description: 'override a key of the template for this run (repeatable)', multiple: true, default: [] }),
  };
  static override summary = 'Add a one-shot';

  async run(): Promise<TriggerView> {
    const { args, flags } = await this.parse(TriggersOnceAdd);
    const t = await (await this.ops()).triggersOnceAdd({ template: args.template, at: flags.at, set: flags.set });
    if (!this.jsonEnabled()) this.log(`trigger ${t.id}: once at ${t.nextDueAt} of ${t.template}`);
    return t;
  }
}
