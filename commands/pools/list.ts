import Table from 'cli-table3';
import { BaseCommand } from '../../src/cli/base.js';
import { poolLimitList, type PoolRow } from '../../src/store/pools.js';

export default class PoolsList extends BaseCommand<typeof PoolsList> {
  static override description = 'List concurrency pools: every pool with a limit and every pool currently held, with its holders (step and attempt).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> pools list', '<%= config.bin %> pools list --json'];
  static override summary = 'List pools and their holders';

  async run(): Promise<{ pools: PoolRow[] }> {
    const pools = await poolLimitList(await this.store());
    if (!this.jsonEnabled()) {
      if (pools.length === 0) this.log('no pools');
      else {
        const table = new Table({ head: ['pool', 'held', 'limit', 'holders (step/attempt)'] });
        for (const p of pools) table.push([p.name, String(p.holders.length), p.limit === null ? 'unlimited' : String(p.limit), p.holders.map((h) => `${h.stepId}/${h.attempt}`).join(' ')]);
        this.log(table.toString());
      }
    }
    return { pools };
  }
}
