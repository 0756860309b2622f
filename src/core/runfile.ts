import { LineCounter, parseDocument, parse as parseYaml, visit } from 'yaml';
import { FORBIDDEN_KEYS, LOAD_MAX, LOAD_MIN, unsafeTextReason } from './bounds.js';
import { parseDuration } from './duration.js';
import type { PlacementRequirement } from './entry.js';

/** One thing wrong with a run file, at its dotted path (`steps.deploy.needs[0]`). */
export interface RunFileProblem { path: string; message: string }

export interface StepDefinition {
  name: string;
  run: string;
  needs: string[];
  env: Record<string, string>;
  timeoutMs: number | null;
  pools: string[];
  load: number;
  priority: number | null;
  placement: PlacementRequirement | null;
}

/** A validated run file with its defaults filled in; steps in file order. */
export interface RunDefinition {
  name: string;
  project: string;
  target: string | null;
  scope: 'step' | 'run';
  maxParallelSteps: number;
  priority: number;
  env: Record<string, string>;
  placement: PlacementRequirement | null;
  steps: StepDefinition[];
}

export type RunFileResult = { ok: true; definition: RunDefinition } | { ok: false; problems: RunFileProblem[] };

const RUN_KEYS = ['name', 'project', 'target', 'scope', 'max_parallel_steps', 'priority', 'env', 'placement', 'steps'] as const;
const STEP_KEYS = ['run', 'needs', 'env', 'timeout', 'pools', 'load', 'priority', 'placement'] as const;
const PLACEMENT_KEYS = ['group', 'selectors', 'labels', 'executors'] as const;

/** Step names end up in paths, logs and env (`OPSCHAIN_STEP`): keep them plain. */
export const STEP_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,62}$/;
const PROJECT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const POOL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$/;
/** The most steps one run may have. */
export const MAX_STEPS = 1000;
/** The longest text a field may hold (a step's command, an env value). */
export const MAX_TEXT = 64 * 1024;
/** Names, labels, selector keys and values, targets. */
const MAX_NAME_TEXT = 256;

/*
 * The bounds of a run, on what is stored rather than on what was sent: a few bytes of YAML can
 * name one anchor many times, and every step row keeps its own copy of the run's env, so the text
 * of a file says little about the rows it becomes. Every transport (the CLI, POST /api/runs,
 * templates and the triggers that fire them) goes through runFileParse and validateRunFile.
 */
/** The largest run file, in bytes of UTF-8, refused before it is parsed. */
export const RUN_FILE_MAX_BYTES = 1024 * 1024;
/**
 * The most YAML aliases (`*name`) one file may use, counted over the whole file, and the budget
 * the parser gets for nested ones (an alias of a map holding aliases counts every copy). Enough to
 * share an env map or a placement among a run's steps, too few to multiply a file into megabytes.
 */
export const MAX_ALIASES = 100;
/** A step's command, in bytes of UTF-8. */
export const MAX_COMMAND_BYTES = 64 * 1024;
/**
 * The environment a step receives (the run's env overlaid by the step's), names and values in
 * bytes of UTF-8; also the run's own env. Linux refuses one `NAME=value` above 128 KiB.
 */
export const MAX_ENV_BYTES = 128 * 1024;
/**
 * The whole run as stored: the file's data once aliases are resolved (as JSON), plus each step's
 * command and environment, which every step row keeps.
 */
export const MAX_EXPANDED_BYTES = 4 * 1024 * 1024;
const MAX_SYNTAX_PROBLEMS = 10;

const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');
const KIB = (n: number): string => (n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : `${n / 1024} KiB`);
const sizeLimit = (n: number): string => `${KIB(n)} (${n} bytes)`;

/** Where each field's value is a number or a list, so `--set` can coerce its text. */
export type FieldKind = 'string' | 'number' | 'list' | 'map' | 'other';

/** The kind of the field a dotted `--set` path lands on, or 'other' when the path is not a known field. */
export function fieldKind(path: string[]): FieldKind {
  const [head, ...rest] = path;
  const placementKind = (p: string[]): FieldKind => {
    if (p.length === 0) return 'map';
    if (p[0] === 'selectors') return p.length === 1 ? 'map' : p.length === 2 ? 'list' : 'other';
    if (p.length === 1 && (p[0] === 'labels' || p[0] === 'executors')) return 'list';
    if (p.length === 1 && p[0] === 'group') return 'string';
    return 'other';
  };
  switch (head) {
    case 'priority':
    case 'max_parallel_steps':
      return rest.length === 0 ? 'number' : 'other';
    case 'name':
    case 'project':
    case 'target':
    case 'scope':
      return rest.length === 0 ? 'string' : 'other';
    case 'env':
      return rest.length === 0 ? 'map' : rest.length === 1 ? 'string' : 'other';
    case 'placement':
      return placementKind(rest);
    case 'steps': {
      if (rest.length < 2) return 'map';
      const [, field, ...more] = rest;
      if (field === 'priority' || field === 'load') return more.length === 0 ? 'number' : 'other';
      if (field === 'needs' || field === 'pools') return more.length === 0 ? 'list' : 'other';
      if (field === 'run' || field === 'timeout') return more.length === 0 ? 'string' : 'other';
      if (field === 'env') return more.length === 0 ? 'map' : more.length === 1 ? 'string' : 'other';
      if (field === 'placement') return placementKind(more);
      return 'other';
    }
    default:
      return 'other';
  }
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown): string => (v === undefined ? 'nothing' : JSON.stringify(v));

function distance(a: string, b: string): number {
  const dp = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) dp[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      dp[i][j] = Math.min(dp[i - 1][j] + 1, dp[i][j - 1] + 1, dp[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return dp[a.length][b.length];
}

class Collector {
  readonly problems: RunFileProblem[] = [];
  add(path: string, message: string): void {
    this.problems.push({ path, message });
  }

  /** Reports keys outside `allowed`, suggesting the nearest one for a likely typo. */
  unknownKeys(obj: Record<string, unknown>, allowed: readonly string[], at: string): void {
    for (const key of Object.keys(obj)) {
      if (allowed.includes(key)) continue;
      if (FORBIDDEN_KEYS.has(key)) {
        this.add(join(at, key), 'not allowed as a key');
        continue;
      }
      const near = allowed.map((k) => ({ k, d: distance(key, k) })).sort((x, y) => x.d - y.d)[0];
      const hint = near && near.d <= 2 ? `; did you mean "${near.k}"?` : ` (expected one of ${allowed.join(', ')})`;
      this.add(join(at, key), `unknown key${hint}`);
    }
  }

  /** Text the store can hold: no NUL, no lone surrogate, at most max characters. */
  safe(v: string, path: string, max: number): boolean {
    const why = unsafeTextReason(v);
    if (why) this.add(path, why);
    else if (v.length > max) this.add(path, `longer than ${max} characters`);
    return !why && v.length <= max;
  }

  string(v: unknown, path: string, opts: { pattern?: RegExp; what?: string; max?: number } = {}): string | undefined {
    if (typeof v !== 'string' || v.trim() === '') {
      this.add(path, `expected ${opts.what ?? 'a non-empty string'}, got ${show(v)}`);
      return undefined;
    }
    if (!this.safe(v, path, opts.max ?? MAX_NAME_TEXT)) return undefined;
    if (opts.pattern && !opts.pattern.test(v)) {
      this.add(path, `expected ${opts.what ?? 'a plain name'}, got ${show(v)}`);
      return undefined;
    }
    return v;
  }

  stringList(v: unknown, path: string, opts: { pattern?: RegExp; what?: string; item?: string } = {}): string[] | undefined {
    if (!Array.isArray(v)) {
      this.add(path, `expected a list of ${opts.what ?? 'strings'}, got ${show(v)}`);
      return undefined;
    }
    const out: string[] = [];
    v.forEach((item, i) => {
      const s = this.string(item, `${path}[${i}]`, { pattern: opts.pattern, what: opts.item });
      if (s !== undefined && !out.includes(s)) out.push(s);
    });
    return out;
  }

  integer(v: unknown, path: string, min: number, max: number): number | undefined {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      this.add(path, `expected a whole number ${max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`}, got ${show(v)}`);
      return undefined;
    }
    return v;
  }

  env(v: unknown, path: string): Record<string, string> {
    if (!isMap(v)) {
      this.add(path, `expected a map of variable names to values, got ${show(v)}`);
      return {};
    }
    const out: Record<string, string> = {};
    for (const [k, val] of Object.entries(v)) {
      const p = join(path, k);
      if (!ENV_NAME.test(k)) this.add(p, 'not a valid environment variable name (letters, digits and _, not starting with a digit)');
      else if (k.startsWith('OPSCHAIN_')) this.add(p, 'the OPSCHAIN_ prefix is reserved for variables the runner sets');
      else if (typeof val === 'string') {
        if (this.safe(val, p, MAX_TEXT)) out[k] = val;
      }
      // A bare number or boolean in YAML is almost always meant as its text.
      else if (typeof val === 'number' || typeof val === 'boolean') out[k] = String(val);
      else this.add(p, `expected a string, got ${show(val)}`);
    }
    return out;
  }

  placement(v: unknown, path: string): PlacementRequirement | null {
    if (!isMap(v)) {
      this.add(path, `expected a map with group, selectors, labels or executors, got ${show(v)}`);
      return null;
    }
    this.unknownKeys(v, PLACEMENT_KEYS, path);
    const out: PlacementRequirement = {};
    if (v.group !== undefined) {
      if (Array.isArray(v.group)) {
        const groups = this.stringList(v.group, join(path, 'group'), { what: 'group names' });
        if (groups && groups.length === 0) this.add(join(path, 'group'), 'expected at least one group name');
        else if (groups) out.group = groups;
      } else {
        const g = this.string(v.group, join(path, 'group'), { what: 'a group name or a list of group names' });
        if (g !== undefined) out.group = g;
      }
    }
    if (v.selectors !== undefined) {
      const sp = join(path, 'selectors');
      if (!isMap(v.selectors)) this.add(sp, `expected a map of attribute names to lists of values, got ${show(v.selectors)}`);
      else {
        const selectors: Record<string, string[]> = {};
        for (const [k, vals] of Object.entries(v.selectors)) {
          if (!this.safe(k, join(sp, k), MAX_NAME_TEXT)) continue;
          const list = this.stringList(vals, join(sp, k), { what: 'values' });
          if (list && list.length === 0) this.add(join(sp, k), 'expected at least one value');
          else if (list) selectors[k] = list;
        }
        if (Object.keys(selectors).length) out.selectors = selectors;
      }
    }
    for (const key of ['labels', 'executors'] as const) {
      if (v[key] === undefined) continue;
      const list = this.stringList(v[key], join(path, key));
      if (list && list.length) out[key] = list;
    }
    return Object.keys(out).length ? out : null;
  }
}

function join(path: string, key: string): string {
  const seg = /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? key : JSON.stringify(key);
  return path ? `${path}.${seg}` : seg;
}

/**
 * Every cycle among the steps' needs, one per tangle, named from a step in file order:
 * `["a", "b", "a"]`. Needs that name no step are ignored here (reported elsewhere).
 */
export function findCycles(steps: Array<{ name: string; needs: string[] }>): string[][] {
  const byName = new Map(steps.map((s) => [s.name, s]));
  const order = new Map(steps.map((s, i) => [s.name, i]));
  const state = new Map<string, 'open' | 'done'>();
  const inCycle = new Set<string>();
  const cycles: string[][] = [];
  // Depth-first with an explicit stack (a chain of thousands of needs must not overflow the call
  // stack): each frame is a step and the index of the next need to look at.
  for (const root of steps) {
    if (state.has(root.name)) continue;
    const path: string[] = [root.name];
    const next: number[] = [0];
    state.set(root.name, 'open');
    while (path.length > 0) {
      const name = path[path.length - 1];
      const needs = byName.get(name)?.needs ?? [];
      const i = next[next.length - 1]++;
      if (i >= needs.length) {
        path.pop();
        next.pop();
        state.set(name, 'done');
        continue;
      }
      const dep = needs[i];
      if (!byName.has(dep)) continue;
      const s = state.get(dep);
      if (s === 'open') {
        // The edge runs from a step to what it needs; read it the other way round so the cycle follows execution order.
        const cycle = path.slice(path.indexOf(dep)).reverse();
        if (!cycle.some((n) => inCycle.has(n))) {
          cycle.forEach((n) => inCycle.add(n));
          const start = cycle.reduce((best, n, j) => (order.get(n)! < order.get(cycle[best])! ? j : best), 0);
          const rotated = [...cycle.slice(start), ...cycle.slice(0, start)];
          cycles.push([...rotated, rotated[0]]);
        }
      } else if (s === undefined) {
        state.set(dep, 'open');
        path.push(dep);
        next.push(0);
      }
    }
  }
  return cycles;
}

/** Steps in dependency order: each after everything it needs, otherwise in file order. Assumes no cycle. */
export function dependencyOrder<T extends { name: string; needs: string[] }>(steps: T[]): T[] {
  const known = new Set(steps.map((s) => s.name));
  const placed = new Set<string>();
  const out: T[] = [];
  let remaining = steps;
  // Rounds of "everything whose needs are placed", each in file order; a chain costs one pass
  // per round over what is left, so the pass skips ahead to the first step it unblocked.
  while (remaining.length) {
    const next: T[] = [];
    const rest: T[] = [];
    for (const s of remaining) (s.needs.every((n) => placed.has(n) || !known.has(n)) ? next : rest).push(s);
    if (next.length === 0) return [...out, ...remaining]; // a cycle: keep the rest in file order
    for (const s of next) placed.add(s.name);
    out.push(...next);
    remaining = rest;
  }
  return out;
}

export type RunFileParse = { ok: true; raw: unknown } | { ok: false; problems: RunFileProblem[] };

const aliasBudgetProblem = (): RunFileProblem => ({
  path: '(file)',
  message: `YAML aliases expand beyond the budget of ${MAX_ALIASES} (an alias of something holding aliases counts every copy); write the values out or share less`,
});

/**
 * A run file's text (YAML, or JSON which is YAML too) as data, before validation: refused by its
 * size before it is parsed (RUN_FILE_MAX_BYTES), then for syntax, duplicate keys and more YAML
 * aliases than MAX_ALIASES, each as a problem naming the limit. Never throws for bad input.
 */
export function runFileParse(text: string): RunFileParse {
  const size = bytes(text);
  if (size > RUN_FILE_MAX_BYTES) {
    return { ok: false, problems: [{ path: '(file)', message: `${size} bytes, larger than ${sizeLimit(RUN_FILE_MAX_BYTES)}; a run file is refused above that size` }] };
  }
  // Duplicate keys and syntax errors come back as document errors rather than a throw.
  const lines = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter: lines });
  if (doc.errors.length) {
    const shown = doc.errors.slice(0, MAX_SYNTAX_PROBLEMS).map((e) => {
      const pos = lines.linePos(e.pos[0]);
      return { path: `(file) line ${pos.line} column ${pos.col}`, message: e.message.split('\n')[0] };
    });
    if (doc.errors.length > MAX_SYNTAX_PROBLEMS) shown.push({ path: '(file)', message: `and ${doc.errors.length - MAX_SYNTAX_PROBLEMS} more syntax problems` });
    return { ok: false, problems: shown };
  }
  // The parser's own budget is per anchor: many anchors, each used up to it, still multiply a
  // file, so the aliases of the whole file are counted first.
  let aliases = 0;
  visit(doc, { Alias: () => (++aliases > MAX_ALIASES ? visit.BREAK : undefined) });
  if (aliases > MAX_ALIASES) return { ok: false, problems: [{ path: '(file)', message: `more than ${MAX_ALIASES} YAML aliases (*name); a run file may use at most ${MAX_ALIASES}` }] };
  try {
    return { ok: true, raw: doc.toJS({ maxAliasCount: MAX_ALIASES }) as unknown };
  } catch (err) {
    // The parser throws (ReferenceError) for an alias budget exceeded or an alias it cannot resolve.
    if (/excessive alias count/i.test((err as Error).message)) return { ok: false, problems: [aliasBudgetProblem()] };
    return { ok: false, problems: [{ path: '(file)', message: (err as Error).message.split('\n')[0] }] };
  }
}

/** A `--set` value written as YAML (`[build]`, `{location: [dc1]}`), under the same alias budget as a file. */
export function runFileValueParse(text: string): unknown {
  try {
    return parseYaml(text, { maxAliasCount: MAX_ALIASES }) as unknown;
  } catch (err) {
    if (/excessive alias count/i.test((err as Error).message)) throw new Error(aliasBudgetProblem().message);
    throw err;
  }
}

/**
 * The size of a value as JSON, in bytes, counting every copy an alias made; stops counting once
 * past `limit` (every value counts at least one byte, so the walk is bounded by the limit, however
 * many times aliases multiply what it walks).
 */
export function expandedBytes(value: unknown, limit: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length && total <= limit) {
    const v = stack.pop();
    if (typeof v === 'string') total += bytes(v) + 2;
    else if (Array.isArray(v)) {
      total += 1 + Math.max(v.length, 1);
      for (const item of v) stack.push(item);
    } else if (isMap(v)) {
      const keys = Object.keys(v);
      total += 1 + Math.max(keys.length, 1);
      for (const k of keys) {
        total += bytes(k) + 3;
        stack.push(v[k]);
      }
    } else total += String(v).length;
  }
  return total;
}

const envBytes = (env: Record<string, string>): number => Object.entries(env).reduce((n, [k, v]) => n + bytes(k) + bytes(v), 0);

const expandedProblem = (): RunFileProblem => ({
  path: '(file)',
  message: `the run expands to more than ${sizeLimit(MAX_EXPANDED_BYTES)} once YAML aliases are resolved and each step's environment is filled in; a run is refused above that size`,
});

/** Validates a parsed run file (YAML or JSON) against DESIGN 4a, collecting every problem. */
export function validateRunFile(raw: unknown): RunFileResult {
  const c = new Collector();
  if (!isMap(raw)) {
    c.add('(file)', `expected a map with name and steps, got ${show(raw)}`);
    return { ok: false, problems: c.problems };
  }
  // Measured before anything else is looked at: validating walks every copy an alias made.
  const dataBytes = expandedBytes(raw, MAX_EXPANDED_BYTES);
  if (dataBytes > MAX_EXPANDED_BYTES) return { ok: false, problems: [expandedProblem()] };
  c.unknownKeys(raw, RUN_KEYS, '');
  const name = raw.name === undefined ? (c.add('name', 'required'), undefined) : c.string(raw.name, 'name');
  const project = raw.project === undefined ? 'default' : c.string(raw.project, 'project', { pattern: PROJECT_NAME, what: 'a project name (letters, digits, . _ -)' });
  const target = raw.target === undefined || raw.target === null ? null : c.string(raw.target, 'target', { what: 'a path like acme/prod/web' });
  let scope: 'step' | 'run' = 'step';
  if (raw.scope !== undefined) {
    if (raw.scope === 'step' || raw.scope === 'run') scope = raw.scope;
    else c.add('scope', `expected step or run, got ${show(raw.scope)}`);
  }
  const maxParallelSteps = raw.max_parallel_steps === undefined ? 1 : c.integer(raw.max_parallel_steps, 'max_parallel_steps', 1, 1000);
  const priority = raw.priority === undefined ? 0 : c.integer(raw.priority, 'priority', 0, 199);
  const env = raw.env === undefined || raw.env === null ? {} : c.env(raw.env, 'env');
  const runEnvBytes = envBytes(env);
  if (runEnvBytes > MAX_ENV_BYTES) c.add('env', `${runEnvBytes} bytes of names and values, larger than ${sizeLimit(MAX_ENV_BYTES)}; a run's env is refused above that size`);
  const placement = raw.placement === undefined || raw.placement === null ? null : c.placement(raw.placement, 'placement');

  const steps: StepDefinition[] = [];
  let storedBytes = dataBytes;
  if (raw.steps === undefined) c.add('steps', 'required');
  else if (!isMap(raw.steps)) c.add('steps', `expected a map of step names to steps, got ${show(raw.steps)}`);
  else if (Object.keys(raw.steps).length === 0) c.add('steps', 'expected at least one step');
  else if (Object.keys(raw.steps).length > MAX_STEPS) c.add('steps', `at most ${MAX_STEPS} steps in one run, got ${Object.keys(raw.steps).length}`);
  else {
    const names = new Set(Object.keys(raw.steps));
    for (const [stepName, body] of Object.entries(raw.steps)) {
      const at = join('steps', stepName);
      if (!STEP_NAME.test(stepName)) c.add(at, 'a step name must start with a letter or _ and hold only letters, digits, _ and - (at most 63)');
      if (!isMap(body)) {
        c.add(at, `expected a map with run, got ${show(body)}`);
        continue;
      }
      c.unknownKeys(body, STEP_KEYS, at);
      const run = body.run === undefined ? (c.add(join(at, 'run'), 'required'), undefined) : c.string(body.run, join(at, 'run'), { what: 'a shell command', max: MAX_TEXT });
      if (run !== undefined && bytes(run) > MAX_COMMAND_BYTES) c.add(join(at, 'run'), `${bytes(run)} bytes, larger than ${sizeLimit(MAX_COMMAND_BYTES)}; a step's command is refused above that size`);
      let needs: string[] = [];
      if (body.needs !== undefined && body.needs !== null) {
        const list = c.stringList(body.needs, join(at, 'needs'), { what: 'step names', item: 'a step name' });
        if (list) {
          needs = list;
          (body.needs as unknown[]).forEach((n, i) => {
            if (typeof n === 'string' && n.trim() !== '' && !names.has(n)) c.add(`${join(at, 'needs')}[${i}]`, `no step named ${show(n)}`);
          });
        }
      }
      const stepEnv = body.env === undefined || body.env === null ? {} : c.env(body.env, join(at, 'env'));
      // What the step row keeps: the run's env overlaid by the step's, without building it.
      const overridden = Object.keys(stepEnv).reduce((n, k) => n + (Object.hasOwn(env, k) ? bytes(k) + bytes(env[k]) : 0), 0);
      const effectiveEnvBytes = runEnvBytes - overridden + envBytes(stepEnv);
      if (effectiveEnvBytes > MAX_ENV_BYTES) c.add(join(at, 'env'), `the step's environment (the run's env overlaid by the step's) is ${effectiveEnvBytes} bytes of names and values, larger than ${sizeLimit(MAX_ENV_BYTES)}; refused above that size`);
      storedBytes += bytes(run ?? '') + effectiveEnvBytes;
      let timeoutMs: number | null = null;
      if (body.timeout !== undefined && body.timeout !== null) {
        const ms = typeof body.timeout === 'string' ? parseDuration(body.timeout) : undefined;
        if (ms === undefined || ms <= 0) c.add(join(at, 'timeout'), `expected a duration like 10m, got ${show(body.timeout)}`);
        else if (ms > 2_147_483_647) c.add(join(at, 'timeout'), `expected a duration under 24d, got ${show(body.timeout)}`);
        else timeoutMs = ms;
      }
      const pools = body.pools === undefined || body.pools === null ? [] : (c.stringList(body.pools, join(at, 'pools'), { pattern: POOL_NAME, what: 'pool names', item: 'a pool name (letters, digits, . _ : -)' }) ?? []);
      let load = 1;
      if (body.load !== undefined) {
        if (typeof body.load !== 'number' || !Number.isFinite(body.load) || body.load < LOAD_MIN || body.load > LOAD_MAX) c.add(join(at, 'load'), `expected a number from ${LOAD_MIN} to ${LOAD_MAX}, got ${show(body.load)}`);
        else load = body.load;
      }
      const stepPriority = body.priority === undefined || body.priority === null ? null : (c.integer(body.priority, join(at, 'priority'), 0, 199) ?? null);
      const stepPlacement = body.placement === undefined || body.placement === null ? null : c.placement(body.placement, join(at, 'placement'));
      steps.push({ name: stepName, run: run ?? '', needs, env: stepEnv, timeoutMs, pools: [...pools].sort(), load, priority: stepPriority, placement: stepPlacement });
    }
    for (const cycle of findCycles(steps)) c.add('steps', `cycle ${cycle.join(' -> ')}`);
  }
  if (storedBytes > MAX_EXPANDED_BYTES) c.add(expandedProblem().path, expandedProblem().message);

  if (c.problems.length) return { ok: false, problems: c.problems };
  return {
    ok: true,
    definition: { name: name!, project: project!, target: target ?? null, scope, maxParallelSteps: maxParallelSteps!, priority: priority!, env, placement, steps },
  };
}

function splitPath(key: string): string[] | undefined {
  const parts = key.split('.');
  return parts.every((p) => p.length > 0) ? parts : undefined;
}

function coerce(kind: FieldKind, text: string): unknown {
  const t = text.trim();
  if (kind === 'number') return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : text;
  if (kind === 'list') {
    if (t === '') return [];
    return t.split(',').map((s) => s.trim());
  }
  return text;
}

/**
 * Applies `--set key=value` overrides to a parsed file, by dotted path, before validation.
 * A value lands as text unless the field takes a number (`priority=60`) or a list
 * (`steps.b.needs=a,c`); `parseStructured` turns a `[..]` or `{..}` value into data.
 */
export function applyOverrides(raw: unknown, sets: string[], parseStructured: (text: string) => unknown): { raw: unknown; problems: RunFileProblem[] } {
  const problems: RunFileProblem[] = [];
  // A file that is not a map at all is refused by validation; overrides cannot repair it.
  if (!isMap(raw)) return { raw, problems };
  const root: Record<string, unknown> = structuredClone(raw);
  for (const set of sets) {
    const eq = set.indexOf('=');
    const path = eq > 0 ? splitPath(set.slice(0, eq)) : undefined;
    if (!path) {
      problems.push({ path: `--set ${set}`, message: 'expected key=value with a dotted key, like env.REGION=us-east-1' });
      continue;
    }
    const bad = path.find((seg) => FORBIDDEN_KEYS.has(seg));
    if (bad !== undefined) {
      problems.push({ path: `--set ${path.join('.')}`, message: `${bad} is not allowed as a key` });
      continue;
    }
    const text = set.slice(eq + 1);
    const kind = fieldKind(path);
    let value: unknown;
    if (/^\s*[[{]/.test(text) && kind !== 'string') {
      try {
        value = parseStructured(text);
      } catch (err) {
        problems.push({ path: `--set ${path.join('.')}`, message: `cannot read ${show(text)}: ${(err as Error).message.split('\n')[0]}` });
        continue;
      }
    } else value = coerce(kind, text);
    let node: Record<string, unknown> = root;
    let ok = true;
    for (let i = 0; i < path.length - 1; i++) {
      const next = Object.hasOwn(node, path[i]) ? node[path[i]] : undefined;
      if (next === undefined || next === null) node[path[i]] = {};
      else if (!isMap(next)) {
        problems.push({ path: `--set ${path.join('.')}`, message: `${path.slice(0, i + 1).join('.')} is not a map` });
        ok = false;
        break;
      }
      node = node[path[i]] as Record<string, unknown>;
    }
    if (ok) node[path[path.length - 1]] = value;
  }
  return { raw: root, problems };
}

/** One line per problem, as the CLI prints them. */
export function formatProblem(p: RunFileProblem): string {
  return `${p.path}: ${p.message}`;
}
