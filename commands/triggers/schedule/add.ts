import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../../src/cli/base.js';
import type { TriggerView } from '../../../src/ops/domain/trigger-definitions.js';

export default class TriggersScheduleAdd extends OpsCommand<typeof TriggersScheduleAdd> {
  static override args = { template: Args.string({ description: 'template to start runs of', required: true }) };
  static override description = `Adds a cron schedule: a run of the template at every tick of the expression, in --tz (default UTC). A bad expression, zone or --set value is refused with the reason (exit 2), and nothing is written.

--overlap says what a tick does while the schedule's previous run still runs: skip (default; the tick is recorded as skipped), queue (it waits, then fires) or allow. --catch-up says what happens to ticks that came due during a platform halt: none (default; recorded as missed), last (the latest fires on resume) or all.`;
  static override enableJsonFlag = true;
  static override examples = [
    `<%= config.bin %> triggers schedule add nightly-backup --cron '0 2 * * *' --tz Europe/Berlin`,
    `<%= config.bin %> triggers schedule add report --cron '*/15 * * * *' --overlap queue --catch-up last --set env.SCOPE=full`,
  ];
  static override flags = {
    'catch-up': Flags.string({ description: 'ticks missed during a halt: none | last | all', default: 'none' }),
    cron: Flags.string({ description: 'cron expression: 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or @daily/@hourly/…', required: true }),
    overlap: Flags.string({ description: 'a tick while the previous run still runs: skip | queue | allow', default: 'skip' }),
    set: Flags.string({ description: 'override a key of the template for these runs (repeatable), as runs submit --set', multiple: true, default: [] }),
    tz: Flags.string({ description: 'IANA time zone the expression is read in', default: 'UTC' }),
  };
  static override summary = 'Add a cron schedule';

  async run(): Promise<TriggerView> {
    const { args, flags } = await this.parse(TriggersScheduleAdd);
    const t = await (await this.ops()).triggersScheduleAdd({ template: args.template, cron: flags.cron, tz: flags.tz, overlap: flags.overlap, catchUp: flags['catch-up'], set: flags.set });
    if (!this.jsonEnabled()) this.log(`trigger ${t.id}: schedule ${t.cron} (${t.tz}) of ${t.template}; next due ${t.nextDueAt}`);
    return t;
  }
}
