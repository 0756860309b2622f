import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { templatesList, type TemplateView } from '../../src/triggers/manage.js';
import { TEMPLATE_HEAD, templateRows } from '../../src/views/triggers.js';

export default class TemplatesList extends BaseCommand<typeof TemplatesList> {
  static override description = 'Every template at its latest version, with its caps.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> templates list', '<%= config.bin %> templates list --json'];
  static override summary = 'List templates';

  async run(): Promise<{ templates: TemplateView[] }> {
    const templates = await templatesList(await this.store());
    if (!this.jsonEnabled()) {
      if (templates.length === 0) this.log('no templates');
      else {
        const table = new Table({ head: TEMPLATE_HEAD });
        table.push(...templateRows(templates));
        this.log(table.toString());
      }
    }
    return { templates };
  }
}
