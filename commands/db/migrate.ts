import { BaseCommand } from '../../src/cli/base.js';
import { migrate } from '../../src/store/migrate.js';

export default class DbMigrate extends BaseCommand<typeof DbMigrate> {
  static override description = 'Apply pending migrations (one transaction, under an advisory lock: safe to run from several places at once).';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> db migrate', '<%= config.bin %> db migrate --database-url postgres://ops@db/opschain --json'];
  static override summary = 'Apply pending migrations';

  async run(): Promise<{ applied: string[] }> {
    const applied = await migrate(await this.store());
    if (!this.jsonEnabled()) this.log(applied.length ? `applied ${applied.length}: ${applied.map((m) => m.name).join(', ')}` : 'up to date');
    return { applied: applied.map((m) => m.name) };
  }
}
