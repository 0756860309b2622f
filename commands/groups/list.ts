import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class GroupsList extends OpsCommand<typeof GroupsList> {
  static override description = 'List runner groups: attributes, exclusive flag, drain state and how many runners are in each.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> groups list --json'];
  static override summary = 'List runner groups';

  async run(): Promise<OpsOutput<'groupsList'>> {
    const result = await (await this.ops()).groupsList({});
    if (!this.jsonEnabled()) {
      if (result.groups.length === 0) this.log('no runner groups');
      else {
        const t = table(['group', 'attributes', 'exclusive', 'drained', 'runners']);
        for (const g of result.groups) {
          const attrs = Object.entries(g.attributes).map(([k, v]) => `${k}=${v}`).join(' ');
          t.push([g.name, attrs, g.exclusive ? 'yes' : '', g.drained ? `yes${g.drainReason ? ` (${g.drainReason})` : ''}` : '', String(g.runners)]);
        }
        this.log(t.toString());
      }
    }
    return result;
  }
}
