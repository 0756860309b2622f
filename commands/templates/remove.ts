import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';

export default class TemplatesRemove extends OpsCommand<typeof TemplatesRemove> {
  static override args = { name: Args.string({ description: 'template name', required: true }) };
  static override description = 'Removes every version of a template. Refused (exit 4) while a trigger still uses it; runs already started keep their name and version.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> templates remove nightly-backup'];
  static override summary = 'Remove a template';

  async run(): Promise<{ name: string; versions: number }> {
    const { args } = await this.parse(TemplatesRemove);
    const r = await (await this.ops()).templatesRemove({ name: args.name });
    if (!this.jsonEnabled()) this.log(`template ${r.name} removed (${r.versions} version${r.versions === 1 ? '' : 's'})`);
    return r;
  }
}
