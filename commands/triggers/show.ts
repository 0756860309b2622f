import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { table as textTable } from '../../src/cli/render.js';
import { parseTriggerId, type TickView, type TriggerView } from '../../src/ops/domain/trigger-definitions.js';
import { TICK_HEAD, tickRows, triggerWhen, webhookOwner } from '../../src/views/triggers.js';

export default class TriggersShow extends OpsCommand<typeof TriggersShow> {
  static override args = { id: Args.string({ description: 'trigger id', required: true }) };
  static override description = 'A trigger and its tick history, newest first: every due tick with its outcome (fired and its run, skipped for overlap, deferred by a cap or ceiling and when it fired, deduplicated, missed during a halt and what catch-up did).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers show 12', '<%= config.bin %> triggers show 12 --limit 200 --json'];
  static override flags = { limit: Flags.integer({ description: 'how many ticks, newest first', default: 50, min: 1, max: 10_000 }) };
  static override summary = 'Show a trigger and its tick history';

  async run(): Promise<TriggerView & { ticks: TickView[] }> {
    const { args, flags } = await this.parse(TriggersShow);
    const t = await (await this.ops()).triggersShow({ id: parseTriggerId(args.id), limit: flags.limit });
    if (!this.jsonEnabled()) {
      this.log(`trigger ${t.id}: ${t.kind} of ${t.template}, ${triggerWhen(t)}${t.enabled ? '' : ' (disabled)'}`);
      if (t.kind === 'schedule') this.log(`overlap ${t.overlap}, catch-up ${t.catchUp}; next due ${t.nextDueAt}`);
      if (t.sets.length) this.log(`set: ${t.sets.join(' ')}`);
      if (t.maps.length) this.log(`map: ${t.maps.map((m) => `${m.key}=${m.path}`).join(' ')}`);
      if (t.kind === 'webhook') this.log(`owner: ${webhookOwner(t.owner)}`);
      if (t.ticks.length === 0) this.log('no ticks yet');
      else {
        const table = textTable(TICK_HEAD);
        table.push(...tickRows(t.ticks));
        this.log(table.toString());
      }
    }
    return t;
  }
}
