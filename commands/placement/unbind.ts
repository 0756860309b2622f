import { Args } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class PlacementUnbind extends OpsCommand<typeof PlacementUnbind> {
  static override args = { path: Args.string({ description: 'the bound path', required: true }) };
  static override description = 'Remove a path binding. Idempotent: unbinding an unbound path succeeds. Entries already queued keep the placement they were classified with.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> placement unbind acme/prod'];
  static override summary = 'Remove a path binding';

  async run(): Promise<OpsOutput<'placementsUnbind'>> {
    const { args } = await this.parse(PlacementUnbind);
    const result = await (await this.ops()).placementsUnbind({ path: args.path });
    if (!this.jsonEnabled()) this.log(result.removed ? `unbound ${result.path}` : `${result.path} had no binding`);
    return result;
  }
}
