import { table } from '../../src/cli/render.js';
import { BaseCommand } from '../../src/cli/base.js';
import { migrationStatus, type MigrationStatus } from '../../src/store/migrate.js';

export default class DbStatus extends BaseCommand<typeof DbStatus> {
  static override description = 'List migrations, applied and pending.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> db status', '<%= config.bin %> db status --json'];
  static override summary = 'Show applied and pending migrations';

  async run(): Promise<{ migrations: MigrationStatus[]; pending: number }> {
    const migrations = await migrationStatus(await this.store());
    const pending = migrations.filter((m) => !m.applied).length;
    if (!this.jsonEnabled()) {
      const t = table(['id', 'name', 'state', 'applied at']);
      for (const m of migrations) t.push([m.id, m.name, m.applied ? 'applied' : 'pending', m.appliedAt ?? '']);
      this.log(t.toString());
      this.log(pending ? `${pending} pending` : 'up to date');
    }
    return { migrations, pending };
  }
}
