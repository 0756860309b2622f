import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyOverrides, dependencyOrder, fieldKind, findCycles, MAX_ALIASES, MAX_EXPANDED_BYTES, runFileParse, validateRunFile } from '../../src/core/runfile.js';
import { RUN_FILE_MAX_BYTES, RunFileInvalid, runFileLoad, runFileRead } from '../../src/orchestrator/runfile.js';

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
      'steps.build.load: expected a number from 0.001 to 100000, got 0',
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

  it('refuses hostile values with a problem each: tiny loads, NUL and lone surrogates, prototype keys', () => {
    expect(problemsOf('name: x\nsteps: {a: {run: "true", load: 1e-50}}\n')).toEqual(['steps.a.load: expected a number from 0.001 to 100000, got 1e-50']);
    expect(problemsOf('{"name":"x\\u0000","env":{"A":"\\ud800"},"steps":{"a":{"run":"t\\u0000","placement":{"selectors":{"k\\u0000":["v"]}}}}}')).toEqual([
      'name: contains a NUL character',
      'env.A: contains an unpaired surrogate (not valid Unicode)',
      'steps.a.run: contains a NUL character',
      'steps.a.placement.selectors."k\\u0000": contains a NUL character',
    ]);
    expect(problemsOf('name: x\n__proto__: {polluted: 1}\nsteps: {a: {run: "true"}}\n')).toEqual(['__proto__: not allowed as a key']);
    expect(problemsOf('name: x\nsteps: {a: {run: "true"}}\n', ['__proto__.polluted=1'])).toEqual(['--set __proto__.polluted: __proto__ is not allowed as a key']);
    expect(problemsOf('name: x\nsteps: {a: {run: "true"}}\n', ['steps.a.constructor.prototype.polluted=1'])).toEqual(['--set steps.a.constructor.prototype.polluted: constructor is not allowed as a key']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('a chain of needs as long as a run may be is checked without overflowing the stack; a deep cycle is still named', () => {
    const chain = Array.from({ length: 1000 }, (_, i) => `  s${i}: {run: "true"${i ? `, needs: [s${i - 1}]` : ''}}`).join('\n');
    const loaded = runFileLoad(`name: x\nsteps:\n${chain}\n`);
    expect(loaded.definition.steps).toHaveLength(1000);
    const deep = Array.from({ length: 50_000 }, (_, i) => ({ name: `s${i}`, needs: [`s${(i + 1) % 50_000}`] }));
    const cycles = findCycles(deep);
    expect(cycles).toHaveLength(1);
    expect(cycles[0]).toHaveLength(50_001);
    expect(problemsOf(`name: x\nsteps:\n${Array.from({ length: 1001 }, (_, i) => `  s${i}: {run: "true"}`).join('\n')}\n`)).toEqual(['steps: at most 1000 steps in one run, got 1001']);
  });

  it('deeply nested YAML is refused as a syntax problem, listing at most ten', () => {
    const problems = problemsOf('['.repeat(100_000));
    expect(problems.length).toBeLessThanOrEqual(11);
    expect(problems.at(-1)).toMatch(/^\(file\): and \d+ more syntax problems$/);
  });

  it('a run file larger than 1 MiB is refused by its size before it is read', () => {
    const dir = mkdtempSync(join(tmpdir(), 'opschain-runfile-'));
    try {
      const big = join(dir, 'big.yaml');
      writeFileSync(big, `name: x\nsteps: {a: {run: "true"}}\n# ${'x'.repeat(RUN_FILE_MAX_BYTES)}\n`);
      expect(() => runFileRead(big)).toThrow(/big.yaml: larger than 1024 KiB; a run file is refused above that size/);
      const small = join(dir, 'small.yaml');
      writeFileSync(small, 'name: x\nsteps: {a: {run: "true"}}\n');
      expect(runFileRead(small)).toBe('name: x\nsteps: {a: {run: "true"}}\n');
      expect(() => runFileRead(dir)).toThrow(/is a directory/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('bounds on what is stored', () => {
    it('a file over 1 MiB is refused by its size before it is parsed, whatever reads it', () => {
      // Unparseable text: had it been parsed, the answer would be syntax problems.
      const text = '['.repeat(RUN_FILE_MAX_BYTES + 1);
      expect(runFileParse(text)).toEqual({ ok: false, problems: [{ path: '(file)', message: `${RUN_FILE_MAX_BYTES + 1} bytes, larger than 1 MiB (1048576 bytes); a run file is refused above that size` }] });
      // Bytes, not characters: 600 Ki two-byte characters are 1.2 MB.
      expect(problemsOf(`name: x\nsteps: {a: {run: "true"}}\n# ${'é'.repeat(600 * 1024)}\n`)).toEqual([expect.stringMatching(/^\(file\): \d+ bytes, larger than 1 MiB \(1048576 bytes\)/)]);
    });

    it('an alias bomb is refused naming the alias budget, as a problem and not a parser crash', () => {
      // Nine levels, each alias of the level above ten times: a billion copies from a few hundred bytes.
      const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
      for (let i = 1; i < 9; i++) levels.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10).fill(`*${String.fromCharCode(96 + i)}`).join(',')}]`);
      const bomb = `name: x\nsteps: {s: {run: "true"}}\nenv: {}\n${levels.map((l) => `x${l}`).join('\n')}\n`;
      expect(problemsOf(bomb)).toEqual([`(file): YAML aliases expand beyond the budget of ${MAX_ALIASES} (an alias of something holding aliases counts every copy); write the values out or share less`]);
      // Many anchors, each used fewer times than the parser's own budget, still count together.
      const anchors = Array.from({ length: 11 }, (_, i) => `  a${i}: &v${i} {run: "true"}\n${Array.from({ length: 10 }, (_, j) => `  b${i}_${j}: *v${i}`).join('\n')}`).join('\n');
      expect(problemsOf(`name: x\nsteps:\n${anchors}\n`)).toEqual([`(file): more than ${MAX_ALIASES} YAML aliases (*name); a run file may use at most ${MAX_ALIASES}`]);
      // Sharing within the budget is fine.
      const shared = runFileLoad(`name: x\nenv: &e {A: "1"}\nsteps:\n${Array.from({ length: 50 }, (_, i) => `  s${i}: {run: "true", env: *e}`).join('\n')}\n`);
      expect(shared.definition.steps).toHaveLength(50);
    });

    it('aliases within the budget cannot make a run larger than the expanded bound', () => {
      const value = 'v'.repeat(60 * 1024);
      const steps = Array.from({ length: 90 }, (_, i) => `  s${i}: {run: "true", env: {X: *big}}`).join('\n');
      const text = `name: x\nproject: &big ${value}\nsteps:\n${steps}\n`;
      expect(Buffer.byteLength(text)).toBeLessThan(80 * 1024);
      expect(problemsOf(text)).toEqual([`(file): the run expands to more than 4 MiB (${MAX_EXPANDED_BYTES} bytes) once YAML aliases are resolved and each step's environment is filled in; a run is refused above that size`]);
    });

    it("the run's env copied into every step row counts against the expanded bound, with no alias at all", () => {
      const text = `name: x\nenv: {A: ${'v'.repeat(60 * 1024)}, B: ${'v'.repeat(60 * 1024)}}\nsteps:\n${Array.from({ length: 40 }, (_, i) => `  s${i}: {run: "true"}`).join('\n')}\n`;
      expect(Buffer.byteLength(text)).toBeLessThan(RUN_FILE_MAX_BYTES);
      expect(problemsOf(text)).toEqual([expect.stringMatching(/^\(file\): the run expands to more than 4 MiB/)]);
      expect(runFileLoad(text.replace(/ {2}s([1-9]\d?): \{run: "true"\}\n/g, '')).definition.steps).toHaveLength(1);
    });

    it("a step's command and its environment are bounded in bytes, naming the field and the limit", () => {
      // 40,000 characters (under the character limit) but 80,000 bytes.
      expect(problemsOf(`name: x\nsteps: {a: {run: "${'é'.repeat(40_000)}"}}\n`)).toEqual(["steps.a.run: 80000 bytes, larger than 64 KiB (65536 bytes); a step's command is refused above that size"]);
      const half = 'v'.repeat(64 * 1024);
      expect(problemsOf(`name: x\nenv: {A: ${half}}\nsteps: {a: {run: "true", env: {B: ${half}}}, b: {run: "true", env: {A: short}}}\n`)).toEqual([
        "steps.a.env: the step's environment (the run's env overlaid by the step's) is 131074 bytes of names and values, larger than 128 KiB (131072 bytes); refused above that size",
      ]);
      expect(problemsOf(`name: x\nenv: {A: ${half}, B: ${half}}\nsteps: {a: {run: "true"}}\n`)).toEqual([
        "env: 131074 bytes of names and values, larger than 128 KiB (131072 bytes); a run's env is refused above that size",
        "steps.a.env: the step's environment (the run's env overlaid by the step's) is 131074 bytes of names and values, larger than 128 KiB (131072 bytes); refused above that size",
      ]);
    });
  });
});
