import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './support/cli.js';

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : /\.tsx?$/.test(f) ? [p] : [];
  });
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  // Type-only imports carry no code: a view may name a store row type.
  return [...text.matchAll(/^\s*(?:import|export)(?!\s+type\s)[^'"]*?from\s+['"]([^'"]+)['"]/gm), ...text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]);
}

const NODE_IO = /^(node:)?(fs|net|http|https|child_process|dgram|dns|tls|worker_threads|cluster)(\/|$)/;

describe('the rules of the house', () => {
  it('src/core imports nothing with I/O and nothing outside core', () => {
    const bad = files(join(ROOT, 'src/core')).flatMap((f) =>
      imports(f)
        .filter((i) => NODE_IO.test(i) || i === 'pg' || (i.startsWith('.') && !join(f, '..', i).startsWith(join(ROOT, 'src/core'))))
        .map((i) => `${relative(ROOT, f)} imports ${i}`),
    );
    expect(bad).toEqual([]);
  });

  it('SQL lives in src/store only: nothing else imports pg', () => {
    const bad = [...files(join(ROOT, 'src')), ...files(join(ROOT, 'commands'))]
      .filter((f) => !f.startsWith(join(ROOT, 'src/store')))
      .flatMap((f) => imports(f).filter((i) => i === 'pg' || i.startsWith('pg/')).map((i) => `${relative(ROOT, f)} imports ${i}`));
    expect(bad).toEqual([]);
  });

  it('the dashboard and views never reach the store', () => {
    const dirs = ['src/tui', 'src/views'].map((d) => join(ROOT, d)).filter((d) => {
      try {
        return statSync(d).isDirectory();
      } catch {
        return false;
      }
    });
    const bad = dirs.flatMap((d) => files(d)).flatMap((f) => imports(f).filter((i) => /\/store\//.test(i) || i === 'pg').map((i) => `${relative(ROOT, f)} imports ${i}`));
    expect(bad).toEqual([]);
  });

  it('lower layers never import the CLI, the HTTP API or the composition root (type-only imports aside)', () => {
    const upper = ['src/cli', 'src/api', 'src/tui'].map((d) => join(ROOT, d));
    const lower = ['src/core', 'src/store', 'src/dispatch', 'src/coordination', 'src/orchestrator', 'src/triggers', 'src/ops', 'src/views', 'src/runner'].map((d) => join(ROOT, d)).filter((d) => {
      try {
        return statSync(d).isDirectory();
      } catch {
        return false;
      }
    });
    // A feature module (`…/feature.ts`) is composition: it wires its loops and routes into a replica.
    const bad = lower.flatMap((d) => files(d)).filter((f) => !f.endsWith('/feature.ts')).flatMap((f) =>
      imports(f)
        .filter((i) => i.startsWith('.'))
        .map((i) => join(f, '..', i))
        .filter((target) => upper.some((u) => target.startsWith(u + '/')))
        .map((target) => `${relative(ROOT, f)} imports ${relative(ROOT, target)}`),
    );
    expect(bad).toEqual([]);
  });
});
