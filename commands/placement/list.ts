import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { placementList, type BindingRow } from '../../src/store/placement.js';

export default class PlacementList extends BaseCommand<typeof PlacementList> {
  static override description = 'List path bindings: target path prefix → placement requirement.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> placement list', '<%= config.bin %> placement list --json'];
  static override summary = 'List path bindings';

  async run(): Promise<{ bindings: BindingRow[] }> {
    const bindings = await placementList(await this.store());
    if (!this.jsonEnabled()) {
      if (bindings.length === 0) this.log('no path bindings');
      else {
        const table = new Table({ head: ['path', 'requirement', 'bound'] });
        for (const b of bindings) table.push([b.path, JSON.stringify(b.requirement), b.createdAt.toISOString()]);
        this.log(table.toString());
      }
    }
    return { bindings };
  }
}
