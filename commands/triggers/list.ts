import { OpsCommand } from '../../src/cli/base.js';
import { table as textTable } from '../../src/cli/render.js';
import type { TriggerView } from '../../src/ops/domain/trigger-definitions.js';
import { TRIGGER_HEAD, triggerRows } from '../../src/views/triggers.js';

export default class TriggersList extends OpsCommand<typeof TriggersList> {
  static override description = 'Every schedule, one-shot and webhook: its template, when it fires, the next due time and whether it is enabled.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> triggers list', '<%= config.bin %> triggers list --json'];
  static override summary = 'List triggers';

  async run(): Promise<{ triggers: TriggerView[] }> {
    const triggers = (await (await this.ops()).triggersList({})).triggers;
    if (!this.jsonEnabled()) {
      if (triggers.length === 0) this.log('no triggers');
      else {
        const table = textTable(TRIGGER_HEAD);
        table.push(...triggerRows(triggers));
        this.log(table.toString());
      }
    }
    return { triggers };
  }
}
