import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { Invalid } from '../../src/errors.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class PoolsSet extends OpsCommand<typeof PoolsSet> {
  static override args = {
    name: Args.string({ description: 'pool name (a step\'s `pools:` entry)', required: true }),
    limit: Args.string({ description: 'how many leased steps may hold it at once (0 holds every step back)', required: true }),
  };
  static override description =
    'Set a concurrency pool\'s limit. Checked at dispatch: a step whose pool is full stays queued ("pool full: db (3/3)") until a holder completes, is released, expires or is cancelled. Lowering a limit below the current holders takes nothing away; new holds wait until the count drops below it.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> pools set db 3'];
  static override summary = 'Set a pool limit';

  async run(): Promise<OpsOutput<'poolsSet'>> {
    const { args } = await this.parse(PoolsSet);
    if (!/^\d{1,10}$/.test(args.limit)) throw new Invalid(`limit ${args.limit}: expected a whole number ≥ 0`);
    const result = await (await this.ops()).poolsSet({ name: args.name, limit: Number(args.limit) });
    if (!this.jsonEnabled()) this.log(`pool ${result.name} limit ${result.limit}`);
    return result;
  }
}
