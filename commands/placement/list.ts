import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class PlacementList extends OpsCommand<typeof PlacementList> {
  static override description = 'List path bindings: target path prefix → placement requirement.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> placement list', '<%= config.bin %> placement list --json'];
  static override summary = 'List path bindings';

  async run(): Promise<OpsOutput<'placementsList'>> {
    const result = await (await this.ops()).placementsList({});
    if (!this.jsonEnabled()) {
      if (result.bindings.length === 0) this.log('no path bindings');
      else {
        const t = table(['path', 'requirement', 'bound']);
        for (const b of result.bindings) t.push([b.path, JSON.stringify(b.requirement), b.createdAt]);
        this.log(t.toString());
      }
    }
    return result;
  }
}
