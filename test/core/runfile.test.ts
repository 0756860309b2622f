import { describe, expect, it } from 'vitest';
import { applyOverrides, dependencyOrder, fieldKind, findCycles, validateRunFile } from '../../src/core/runfile.js';
import { RunFileInvalid, runFileLoad } from '../../src/orchestrator/runfile.js';

const problemsOf = (text: string, sets: string[] = []): string[] => {
  try {
    runFileLoad(text, sets);
  } catch (err) {
    if (err instanceof RunFileInvalid) return err.problems.map((p) => `${p.path}: ${p.message}`);
    throw err;
  }
  return [];
};

describe('run file validation', () => {
  it('accepts the full shape of DESIGN 4a and fills defaults', () => {
    const { definition } = runFileLoad(`
name: deploy-web
project: acme
target: acme/prod/web
scope: run
max_parallel_steps: 2
priority: 60
env: { REGION: eu-west-1, PORT: 8080 }
placement:
  group: [build, deploy]
  selectors: { location: [dc1, dc2] }
  labels: [linux]
  executors: [shell]
steps:
  build:
    run: make build
    timeout: 10m
  migrate:
    run: ./migrate
    needs: [build]
    pools: [db, db]
    load: 0.5
    priority: 120
    env: { REGION: us-east-1 }
    placement: { labels: [db-access] }
`);
    expect(definition).toEqual({
      name: 'deploy-web',
      project: 'acme',
      target: 'acme/prod/web',
      scope: 'run',
      maxParallelSteps: 2,
      priority: 60,
      env: { REGION: 'eu-west-1', PORT: '8080' },
      placement: { group: ['build', 'deploy'], selectors: { location: ['dc1', 'dc2'] }, labels: ['linux'], executors: ['shell'] },
      steps: [
        { name: 'build', run: 'make build', needs: [], env: {}, timeoutMs: 600_000, pools: [], load: 1, priority: null, placement: null },
        { name: 'migrate', run: './migrate', needs: ['build'], env: { REGION: 'us-east-1' }, timeoutMs: null, pools: ['db'], load: 0.5, priority: 120, placement: { labels: ['db-access'] } },
      ],
    });
    const minimal = runFileLoad('name: x\nsteps:\n  a: { run: echo hi }\n').definition;
    expect(minimal).toMatchObject({ project: 'default', target: null, scope: 'step', maxParallelSteps: 1, priority: 0, env: {}, placement: null });
  });

  it('accepts JSON of the same shape', () => {
    const { definition } = runFileLoad(JSON.stringify({ name: 'j', steps: { a: { run: 'true' }, b: { run: 'true', needs: ['a'] } } }));
    expect(definition.steps.map((s) => [s.name, s.needs])).toEqual([['a', []], ['b', ['a']]]);
  });

  it('lists every problem with its path', () => {
    expect(
      problemsOf(`
nmae: typo
priority: 250
scope: everywhere
max_parallel_steps: 0
env: { "bad-name": x, OPSCHAIN_STEP: y, OK: [1] }
placement: { group: "", labels: linux, colour: red }
steps:
  build:
    run: make
    timeout: soon
    tiemout: 5m
    load: 0
  deploy:
    needs: [tset, build]
    pools: ["bad pool"]
    priority: 1.5
  "bad name":
    run: x
`),
    ).toEqual([
      'nmae: unknown key; did you mean "name"?',
      'name: required',
      'scope: expected step or run, got "everywhere"',
      'max_parallel_steps: expected a whole number from 1 to 1000, got 0',
      'priority: expected a whole number from 0 to 199, got 250',
      'env.bad-name: not a valid environment variable name (letters, digits and _, not starting with a digit)',
      'env.OPSCHAIN_STEP: the OPSCHAIN_ prefix is reserved for variables the runner sets',
      'env.OK: expected a string, got [1]',
      'placement.colour: unknown key (expected one of group, selectors, labels, executors)',
      'placement.group: expected a group name or a list of group names, got ""',
      'placement.labels: expected a list of strings, got "linux"',
      'steps.build.tiemout: unknown key; did you mean "timeout"?',
      'steps.build.timeout: expected a duration like 10m, got "soon"',
      'steps.build.load: expected a number above 0, got 0',
      'steps.deploy.run: required',
      'steps.deploy.needs[0]: no step named "tset"',
      'steps.deploy.pools[0]: expected a pool name (letters, digits, . _ : -), got "bad pool"',
      'steps.deploy.priority: expected a whole number from 0 to 199, got 1.5',
      'steps."bad name": a step name must start with a letter or _ and hold only letters, digits, _ and - (at most 63)',
    ]);
  });

  it('names cycles as cycles, once per tangle, in execution order', () => {
    expect(
      problemsOf(`
name: loops
steps:
  a: { run: x, needs: [b] }
  b: { run: x, needs: [a] }
  c: { run: x, needs: [c] }
  d: { run: x, needs: [f] }
  e: { run: x, needs: [d] }
  f: { run: x, needs: [e] }
  g: { run: x, needs: [a] }
`),
    ).toEqual(['steps: cycle a -> b -> a', 'steps: cycle c -> c', 'steps: cycle d -> e -> f -> d']);
    expect(findCycles([{ name: 'a', needs: [] }, { name: 'b', needs: ['a'] }])).toEqual([]);
  });

  it('refuses syntax errors, duplicate keys, an empty file and empty steps', () => {
    expect(problemsOf('name: x\nname: y\nsteps: { a: { run: x } }\n')[0]).toMatch(/^\(file\) line 2 column 1: .*[Uu]nique/);
    expect(problemsOf('name: [unclosed\n')[0]).toMatch(/^\(file\) line/);
    expect(problemsOf('')).toEqual(['(file): expected a map with name and steps, got null']);
    expect(problemsOf('name: x\nsteps: {}\n')).toEqual(['steps: expected at least one step']);
    expect(problemsOf('name: x\nsteps: [a]\n')).toEqual(['steps: expected a map of step names to steps, got ["a"]']);
  });

  it('--set overrides by dotted path before validation, coercing numbers and lists', () => {
    const base = 'name: x\nenv: { REGION: eu }\nsteps:\n  build: { run: make }\n  test: { run: make test }\n';
    const { definition, source } = runFileLoad(base, ['env.REGION=us-east-1', 'priority=60', 'steps.build.run=make all', 'steps.test.needs=build', 'steps.test.load=2.5', 'placement.labels=linux,gpu', 'env.EMPTY=']);
    expect(definition.env).toEqual({ REGION: 'us-east-1', EMPTY: '' });
    expect(definition.priority).toBe(60);
    expect(definition.steps[0].run).toBe('make all');
    expect(definition.steps[1].needs).toEqual(['build']);
    expect(definition.steps[1].load).toBe(2.5);
    expect(definition.placement).toEqual({ labels: ['linux', 'gpu'] });
    expect(source.priority).toBe(60);
    expect(runFileLoad(base, ['steps.test.needs=[build]', 'placement.selectors={location: [dc1]}']).definition.placement).toEqual({ selectors: { location: ['dc1'] } });
    expect(problemsOf(base, ['priority=high', 'noequals', 'steps.build.run.x=1', 'steps.deploy.needs=build'])).toEqual([
      '--set noequals: expected key=value with a dotted key, like env.REGION=us-east-1',
      '--set steps.build.run.x: steps.build.run is not a map',
      'priority: expected a whole number from 0 to 199, got "high"',
      'steps.deploy.run: required',
    ]);
  });

  it('classifies --set targets', () => {
    expect(fieldKind(['priority'])).toBe('number');
    expect(fieldKind(['steps', 'a', 'needs'])).toBe('list');
    expect(fieldKind(['steps', 'a', 'placement', 'selectors', 'location'])).toBe('list');
    expect(fieldKind(['env', 'X'])).toBe('string');
    expect(fieldKind(['steps', 'a', 'run'])).toBe('string');
    expect(applyOverrides(null, ['a=b'], JSON.parse)).toEqual({ raw: null, problems: [] });
  });

  it('orders steps so each follows what it needs', () => {
    const order = dependencyOrder([
      { name: 'd', needs: ['b', 'c'] },
      { name: 'b', needs: ['a'] },
      { name: 'a', needs: [] },
      { name: 'c', needs: ['a'] },
    ]).map((s) => s.name);
    expect(order).toEqual(['a', 'b', 'c', 'd']);
    expect(validateRunFile({ name: 'x', steps: { a: { run: 'x' } } }).ok).toBe(true);
  });
});
