import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class ProjectsList extends OpsCommand<typeof ProjectsList> {
  static override description = 'List projects with a fair-share weight set (every other project weighs 1).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> projects list --json'];
  static override summary = 'List project weights';

  async run(): Promise<OpsOutput<'projectsList'>> {
    const result = await (await this.ops()).projectsList({});
    if (!this.jsonEnabled()) {
      if (result.projects.length === 0) this.log('no project weights set (every project weighs 1)');
      else {
        const t = table(['project', 'weight']);
        for (const p of result.projects) t.push([p.name, String(p.weight)]);
        this.log(t.toString());
      }
    }
    return result;
  }
}
