import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { groupList, type GroupRow } from '../../src/store/groups.js';

export default class GroupsList extends BaseCommand<typeof GroupsList> {
  static override description = 'List runner groups: attributes, exclusive flag, drain state and how many runners are in each.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> groups list --json'];
  static override summary = 'List runner groups';

  async run(): Promise<{ groups: GroupRow[] }> {
    const groups = await groupList(await this.store());
    if (!this.jsonEnabled()) {
      if (groups.length === 0) this.log('no runner groups');
      else {
        const table = new Table({ head: ['group', 'attributes', 'exclusive', 'drained', 'runners'] });
        for (const g of groups) {
          const attrs = Object.entries(g.attributes).map(([k, v]) => `${k}=${v}`).join(' ');
          table.push([g.name, attrs, g.exclusive ? 'yes' : '', g.drained ? `yes${g.drainReason ? ` (${g.drainReason})` : ''}` : '', String(g.runners)]);
        }
        this.log(table.toString());
      }
    }
    return { groups };
  }
}
