import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import type { TemplateDetail } from '../../src/ops/domain/trigger-definitions.js';

export default class TemplatesShow extends OpsCommand<typeof TemplatesShow> {
  static override args = { name: Args.string({ description: 'template name', required: true }) };
  static override description = 'A template: its run file (latest version, or --version), caps, versions and the triggers that use it.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> templates show nightly-backup', '<%= config.bin %> templates show nightly-backup --version 2 --json'];
  static override flags = { version: Flags.integer({ description: 'show this version', min: 1 }) };
  static override summary = 'Show a template';

  async run(): Promise<TemplateDetail> {
    const { args, flags } = await this.parse(TemplatesShow);
    const t = await (await this.ops()).templatesShow({ name: args.name, version: flags.version });
    if (!this.jsonEnabled()) {
      this.log(`template ${t.name} v${t.version} of ${t.versions} (by ${t.createdBy ?? '-'}, ${t.createdAt})`);
      this.log(`max concurrent runs: ${t.maxConcurrentRuns ?? 'unlimited'}; daily ceiling: ${t.dailyCeiling ?? 'none'}`);
      this.log(`triggers: ${t.triggers.length ? t.triggers.join(', ') : 'none'}`);
      this.log('---');
      this.log(t.source.trimEnd());
    }
    return t;
  }
}
