import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class PoolsUnset extends OpsCommand<typeof PoolsUnset> {
  static override args = { name: Args.string({ description: 'pool name', required: true }) };
  static override description = 'Remove a pool\'s limit: the pool becomes unlimited. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> pools unset db'];
  static override summary = 'Remove a pool limit';

  async run(): Promise<OpsOutput<'poolsUnset'>> {
    const { args } = await this.parse(PoolsUnset);
    const result = await (await this.ops()).poolsUnset({ name: args.name });
    if (!this.jsonEnabled()) this.log(result.removed ? `pool ${result.name} is unlimited now` : `pool ${result.name} had no limit`);
    return result;
  }
}
