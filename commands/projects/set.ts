import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parsePositive } from '../../src/cli/kv.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class ProjectsSet extends OpsCommand<typeof ProjectsSet> {
  static override args = { name: Args.string({ description: 'project name (a run file\'s `project:`)', required: true }) };
  static override description =
    'Set a project\'s fair-share weight. Within a priority lane, projects get deliveries in proportion to their weights (default 1). The weight is frozen on each step at enqueue, so it applies to steps that become ready from now on.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> projects set acme --weight 3'];
  static override flags = { weight: Flags.string({ description: 'relative share, a number above 0 (default for unset projects: 1)', required: true }) };
  static override summary = 'Set a project\'s fair-share weight';

  async run(): Promise<OpsOutput<'projectsSet'>> {
    const { args } = await this.parse(ProjectsSet);
    const row = await (await this.ops()).projectsSet({ name: args.name, weight: parsePositive('weight', this.flags.weight) });
    if (!this.jsonEnabled()) this.log(`project ${row.name} weight ${row.weight}`);
    return row;
  }
}
