import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

// `npm ci` warns EBADENGINE when any installed package needs a newer Node than ours allows;
// the lockfile names every package's own range, so the promise in `engines` can be checked.
const root = new URL('../../', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[]; optional?: boolean; dev?: boolean }>;
};

describe('engines', () => {
  it('every locked package runs on the oldest Node that package.json accepts', () => {
    const oldest = semver.minVersion(manifest.engines.node);
    expect(oldest).not.toBeNull();
    const misfits: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const engines = entry.engines;
      if (!path || !engines || Array.isArray(engines) || !engines.node) continue;
      if (!semver.satisfies(oldest!, engines.node)) misfits.push(`${path} needs node ${engines.node}`);
    }
    expect(misfits).toEqual([]);
  });

  it('the Node running the tests is one package.json accepts', () => {
    expect(semver.satisfies(process.versions.node, manifest.engines.node)).toBe(true);
  });
});
