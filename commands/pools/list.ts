import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class PoolsList extends OpsCommand<typeof PoolsList> {
  static override description = 'List concurrency pools: every pool with a limit and every pool currently held, with its holders (step and attempt).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> pools list', '<%= config.bin %> pools list --json'];
  static override summary = 'List pools and their holders';

  async run(): Promise<OpsOutput<'poolsList'>> {
    const result = await (await this.ops()).poolsList({});
    if (!this.jsonEnabled()) {
      if (result.pools.length === 0) this.log('no pools');
      else {
        const t = table(['pool', 'held', 'limit', 'holders (step/attempt)']);
        for (const p of result.pools) t.push([p.name, String(p.holders.length), p.limit === null ? 'unlimited' : String(p.limit), p.holders.map((h) => `${h.stepId}/${h.attempt}`).join(' ')]);
        this.log(t.toString());
      }
    }
    return result;
  }
}
