import { OpsCommand } from '../../src/cli/base.js';
import { table as textTable } from '../../src/cli/render.js';
import type { TemplateView } from '../../src/ops/domain/trigger-definitions.js';
import { TEMPLATE_HEAD, templateRows } from '../../src/views/triggers.js';

export default class TemplatesList extends OpsCommand<typeof TemplatesList> {
  static override description = 'Every template at its latest version, with its caps.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> templates list', '<%= config.bin %> templates list --json'];
  static override summary = 'List templates';

  async run(): Promise<{ templates: TemplateView[] }> {
    const templates = (await (await this.ops()).templatesList({})).templates;
    if (!this.jsonEnabled()) {
      if (templates.length === 0) this.log('no templates');
      else {
        const table = textTable(TEMPLATE_HEAD);
        table.push(...templateRows(templates));
        this.log(table.toString());
      }
    }
    return { templates };
  }
}
