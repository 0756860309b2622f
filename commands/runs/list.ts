import { Flags } from '@oclif/core';
import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { RUN_STATUSES, runList } from '../../src/store/runs.js';
import { RUN_LIST_HEAD, runListItem, runListRows, type RunListItem } from '../../src/views/runs.js';

export default class RunsList extends BaseCommand<typeof RunsList> {
  static override description = 'Lists runs, newest first. Page on with --before set to the last id shown (the JSON gives it as next.before).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> runs list', '<%= config.bin %> runs list --status failed --project acme --limit 50', '<%= config.bin %> runs list --before 120 --json'];
  static override flags = {
    before: Flags.integer({ description: 'only runs with an id below this (the next page)', min: 1 }),
    limit: Flags.integer({ description: 'how many runs to show', default: 20, min: 1, max: 1000 }),
    project: Flags.string({ description: 'only runs of this project' }),
    status: Flags.string({ description: 'only runs with this status', options: [...RUN_STATUSES] }),
  };
  static override summary = 'List runs';

  async run(): Promise<{ runs: RunListItem[]; next: { before: number } | null }> {
    const { limit, before, project, status } = this.flags;
    // One more than asked tells whether there is a next page without a count.
    const rows = await runList(await this.store(), { limit: limit + 1, before, project, status: status as (typeof RUN_STATUSES)[number] | undefined });
    const runs = rows.slice(0, limit).map(runListItem);
    const next = rows.length > limit ? { before: runs[runs.length - 1].id } : null;
    if (!this.jsonEnabled()) {
      if (runs.length === 0) this.log('no runs');
      else {
        const table = new Table({ head: RUN_LIST_HEAD });
        table.push(...runListRows(runs));
        this.log(table.toString());
        if (next) this.log(`more: --before ${next.before}`);
      }
    }
    return { runs, next };
  }
}
