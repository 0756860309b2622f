import { Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class AdminAudit extends OpsCommand<typeof AdminAudit> {
  static override description =
    'Every lever pulled (drains, postures, replica quiesce), every token and policy change (pools, projects, groups, placement, templates, triggers) and every run submitted, retried or cancelled: who (token name or OS user), when, from where and why. Newest first.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin audit --since 24h', '<%= config.bin %> admin audit --actor ci-deploy --json', '<%= config.bin %> admin audit --since 2026-12-01T09:00:00Z'];
  static override flags = {
    actor: Flags.string({ description: 'only actors containing this text (case-insensitive): alice, ci-deploy, leader' }),
    limit: Flags.integer({ description: 'at most this many entries [default: 200]', min: 1, max: 10_000 }),
    since: Flags.string({ description: 'only entries since a span back from now (30m, 24h, 7d) or an ISO time' }),
  };
  static override summary = 'Who pulled which lever, when and why';

  async run(): Promise<OpsOutput<'adminAudit'>> {
    const view = await (await this.ops()).adminAudit({ since: this.flags.since, actor: this.flags.actor, limit: this.flags.limit });
    if (!this.jsonEnabled()) {
      if (view.entries.length === 0) this.log('no audit entries');
      else {
        const t = table(['at', 'actor', 'action', 'target', 'reason', 'from']);
        for (const e of view.entries) t.push([e.at, e.actor, e.action, e.target ?? '', e.reason ?? '', e.source ?? '']);
        this.log(t.toString());
        if (view.more) this.log(`(the newest ${view.limit}; narrow with --since or --actor, or raise --limit)`);
      }
    }
    return view;
  }
}
