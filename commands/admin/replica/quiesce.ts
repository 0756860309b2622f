import { Args } from '@oclif/core';
import { OpsCommand } from '../../../src/cli/base.js';
import type { OpsOutput } from '../../../src/ops/index.js';

export default class AdminReplicaQuiesce extends OpsCommand<typeof AdminReplicaQuiesce> {
  static override args = { id: Args.string({ description: 'replica id (see opschain admin status)', required: true }) };
  static override description = 'Take a replica out of the membership: its shards move to the others, it gives up the leader lease and answers its parked runner polls empty (so its runners fail over), while it keeps serving HTTP. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin replica quiesce web-1-3f9a2c'];
  static override summary = 'Take a replica out of the membership';

  async run(): Promise<OpsOutput<'replicaQuiesce'>> {
    const { args } = await this.parse(AdminReplicaQuiesce);
    const result = await (await this.ops()).replicaQuiesce({ id: args.id });
    if (!this.jsonEnabled()) this.log(result.changed ? `quiesced ${result.id}` : `${result.id} was already quiesced`);
    return result;
  }
}
