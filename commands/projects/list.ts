import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { projectList, type ProjectRow } from '../../src/store/projects.js';

export default class ProjectsList extends BaseCommand<typeof ProjectsList> {
  static override description = 'List projects with a fair-share weight set (every other project weighs 1).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> projects list --json'];
  static override summary = 'List project weights';

  async run(): Promise<{ projects: ProjectRow[] }> {
    const projects = await projectList(await this.store());
    if (!this.jsonEnabled()) {
      if (projects.length === 0) this.log('no project weights set (every project weighs 1)');
      else {
        const table = new Table({ head: ['project', 'weight'] });
        for (const p of projects) table.push([p.name, String(p.weight)]);
        this.log(table.toString());
      }
    }
    return { projects };
  }
}
