import { Args } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base.js';
import { NotFoundError } from '../../../src/cli/errors.js';
import { replicaQuiesceSet, type ReplicaLeverResult } from '../../../src/coordination/levers.js';

export default class AdminReplicaQuiesce extends BaseCommand<typeof AdminReplicaQuiesce> {
  static override args = { id: Args.string({ description: 'replica id (see opschain admin status)', required: true }) };
  static override description = 'Take a replica out of the membership: its shards move to the others, it gives up the leader lease and answers its parked runner polls empty (so its runners fail over), while it keeps serving HTTP. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin replica quiesce web-1-3f9a2c'];
  static override summary = 'Take a replica out of the membership';

  async run(): Promise<ReplicaLeverResult> {
    const { args } = await this.parse(AdminReplicaQuiesce);
    const result = await replicaQuiesceSet(await this.store(), { id: args.id, quiesced: true, actor: 'cli', source: 'cli' });
    if (!result) throw new NotFoundError(`no replica with id ${args.id}`);
    if (!this.jsonEnabled()) this.log(result.changed ? `quiesced ${result.id}` : `${result.id} was already quiesced`);
    return result;
  }
}
