import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { auditRecord } from '../../src/store/audit.js';
import { poolLimitUnset } from '../../src/store/pools.js';

export default class PoolsUnset extends BaseCommand<typeof PoolsUnset> {
  static override args = { name: Args.string({ description: 'pool name', required: true }) };
  static override description = 'Remove a pool\'s limit: the pool becomes unlimited. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> pools unset db'];
  static override summary = 'Remove a pool limit';

  async run(): Promise<{ name: string; removed: boolean }> {
    const { args } = await this.parse(PoolsUnset);
    const pool = await this.store();
    const removed = await poolLimitUnset(pool, { name: args.name });
    await auditRecord(pool, { actor: 'cli', action: 'pools.unset', target: args.name, detail: { removed } });
    if (!this.jsonEnabled()) this.log(removed ? `pool ${args.name} is unlimited now` : `pool ${args.name} had no limit`);
    return { name: args.name, removed };
  }
}
