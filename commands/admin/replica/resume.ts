import { Args } from '@oclif/core';
import { OpsCommand } from '../../../src/cli/base.js';
import type { OpsOutput } from '../../../src/ops/index.js';

export default class AdminReplicaResume extends OpsCommand<typeof AdminReplicaResume> {
  static override args = { id: Args.string({ description: 'replica id (see opschain admin status)', required: true }) };
  static override description = 'Bring a quiesced replica back into the membership: it takes its rendezvous shards again on the next ticks. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin replica resume web-1-3f9a2c'];
  static override summary = 'Bring a quiesced replica back';

  async run(): Promise<OpsOutput<'replicaResume'>> {
    const { args } = await this.parse(AdminReplicaResume);
    const result = await (await this.ops()).replicaResume({ id: args.id });
    if (!this.jsonEnabled()) this.log(result.changed ? `resumed ${result.id}` : `${result.id} was already in the membership`);
    return result;
  }
}
