import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { UserError } from '../../src/cli/errors.js';
import { auditRecord } from '../../src/store/audit.js';
import { poolLimitSet } from '../../src/store/pools.js';

export default class PoolsSet extends BaseCommand<typeof PoolsSet> {
  static override args = {
    name: Args.string({ description: 'pool name (a step\'s `pools:` entry)', required: true }),
    limit: Args.string({ description: 'how many leased steps may hold it at once (0 holds every step back)', required: true }),
  };
  static override description =
    'Set a concurrency pool\'s limit. Checked at dispatch: a step whose pool is full stays queued ("pool full: db (3/3)") until a holder completes, is released, expires or is cancelled. Lowering a limit below the current holders takes nothing away; new holds wait until the count drops below it.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> pools set db 3'];
  static override summary = 'Set a pool limit';

  async run(): Promise<{ name: string; limit: number }> {
    const { args } = await this.parse(PoolsSet);
    if (!/^\d+$/.test(args.limit) || Number(args.limit) > 2_147_483_647) throw new UserError(`limit ${args.limit}: expected a whole number ≥ 0`);
    const limit = Number(args.limit);
    if (!args.name.trim()) throw new UserError('pool name: expected a non-empty name');
    const pool = await this.store();
    await poolLimitSet(pool, { name: args.name, limit });
    await auditRecord(pool, { actor: 'cli', action: 'pools.set', target: args.name, detail: { limit } });
    if (!this.jsonEnabled()) this.log(`pool ${args.name} limit ${limit}`);
    return { name: args.name, limit };
  }
}
