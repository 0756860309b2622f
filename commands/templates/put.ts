import { readFileSync } from 'node:fs';
import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { UserError } from '../../src/cli/errors.js';
import type { TemplateView } from '../../src/ops/domain/trigger-definitions.js';

export default class TemplatesPut extends OpsCommand<typeof TemplatesPut> {
  static override args = { file: Args.string({ description: 'the run file (YAML or JSON); - reads it from stdin', required: true }) };
  static override description = `Stores a run file as a named template that triggers start runs from. Every put is a new version; a run records the template name and version it came from. The file is validated whole, as \`runs submit\` would (exit 2, nothing written).

--max-concurrent-runs and --daily-ceiling (runs created since midnight UTC) hold launches back when reached: they wait, never dropped, and go as soon as a run of the template finishes.`;
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> templates put examples/nightly-backup.yaml', '<%= config.bin %> templates put deploy.yaml --name deploy-web --max-concurrent-runs 1 --daily-ceiling 20'];
  static override flags = {
    'daily-ceiling': Flags.integer({ description: 'at most this many runs of the template per day (UTC); later launches wait for the next day' }),
    'max-concurrent-runs': Flags.integer({ description: 'at most this many runs of the template running at once; later launches wait' }),
    name: Flags.string({ description: 'template name (default: the run file\'s name)' }),
  };
  static override summary = 'Store a new version of a template';

  async run(): Promise<TemplateView> {
    const { args, flags } = await this.parse(TemplatesPut);
    let text: string;
    try {
      text = readFileSync(args.file === '-' ? 0 : args.file, 'utf8');
    } catch (err) {
      throw new UserError(`cannot read ${args.file === '-' ? 'stdin' : args.file}: ${(err as Error).message}`);
    }
    const t = await (await this.ops()).templatesPut({ file: text, name: flags.name, maxConcurrentRuns: flags['max-concurrent-runs'], dailyCeiling: flags['daily-ceiling'] });
    if (!this.jsonEnabled()) this.log(`template ${t.name} v${t.version}`);
    return t;
  }
}
