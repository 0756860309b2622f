import { Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import type { OpsOutput } from '../../src/ops/index.js';
import { RUN_STATUSES } from '../../src/store/runs.js';
import { RUN_LIST_HEAD, runListRows } from '../../src/views/runs.js';

export default class RunsList extends OpsCommand<typeof RunsList> {
  static override description = 'Lists runs, newest first. Page on with --before set to the last id shown (the JSON gives it as next.before).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs list', '<%= config.bin %> runs list --status failed --project acme --limit 50', '<%= config.bin %> runs list --before 120 --json'];
  static override flags = {
    before: Flags.integer({ description: 'only runs with an id below this (the next page)', min: 1, max: Number.MAX_SAFE_INTEGER }),
    limit: Flags.integer({ description: 'how many runs to show', default: 20, min: 1, max: 1000 }),
    project: Flags.string({ description: 'only runs of this project' }),
    status: Flags.string({ description: 'only runs with this status', options: [...RUN_STATUSES] }),
  };
  static override summary = 'List runs';

  async run(): Promise<OpsOutput<'runsList'>> {
    const { limit, before, project, status } = this.flags;
    const page = await (await this.ops()).runsList({ limit, before, project, status });
    if (!this.jsonEnabled()) {
      if (page.runs.length === 0) this.log('no runs');
      else {
        const t = table(RUN_LIST_HEAD);
        t.push(...runListRows(page.runs));
        this.log(t.toString());
        if (page.next) this.log(`more: --before ${page.next.before}`);
      }
    }
    return page;
  }
}
