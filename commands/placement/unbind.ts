import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base.js';
import { normalisePath } from '../../src/cli/kv.js';
import { auditRecord } from '../../src/store/audit.js';
import { placementUnbind } from '../../src/store/placement.js';

export default class PlacementUnbind extends BaseCommand<typeof PlacementUnbind> {
  static override args = { path: Args.string({ description: 'the bound path', required: true }) };
  static override description = 'Remove a path binding. Idempotent: unbinding an unbound path succeeds. Entries already queued keep the placement they were classified with.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> placement unbind acme/prod'];
  static override summary = 'Remove a path binding';

  async run(): Promise<{ path: string; removed: boolean }> {
    const { args } = await this.parse(PlacementUnbind);
    const path = normalisePath(args.path);
    const pool = await this.store();
    const removed = await placementUnbind(pool, { path });
    await auditRecord(pool, { actor: 'cli', action: 'placement.unbind', target: path, detail: { removed } });
    if (!this.jsonEnabled()) this.log(removed ? `unbound ${path}` : `${path} had no binding`);
    return { path, removed };
  }
}
