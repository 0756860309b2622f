import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { parsePositive } from '../../src/cli/kv.js';
import { auditRecord } from '../../src/store/audit.js';
import { projectSet, type ProjectRow } from '../../src/store/projects.js';

export default class ProjectsSet extends BaseCommand<typeof ProjectsSet> {
  static override args = { name: Args.string({ description: 'project name (a run file\'s `project:`)', required: true }) };
  static override description =
    'Set a project\'s fair-share weight. Within a priority lane, projects get deliveries in proportion to their weights (default 1). The weight is frozen on each step at enqueue, so it applies to steps that become ready from now on.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> projects set acme --weight 3'];
  static override flags = { weight: Flags.string({ description: 'relative share, a number above 0 (default for unset projects: 1)', required: true }) };
  static override summary = 'Set a project\'s fair-share weight';

  async run(): Promise<ProjectRow> {
    const { args } = await this.parse(ProjectsSet);
    const weight = parsePositive('weight', this.flags.weight);
    const pool = await this.store();
    const row = await projectSet(pool, { name: args.name, weight });
    await auditRecord(pool, { actor: 'cli', action: 'projects.set', target: row.name, detail: { weight } });
    if (!this.jsonEnabled()) this.log(`project ${row.name} weight ${row.weight}`);
    return row;
  }
}
