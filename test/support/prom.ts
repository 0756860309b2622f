/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4), for tests: every
 * line must be a HELP, a TYPE, a comment or a well-formed sample of a declared family, or it
 * throws naming the line.
 */
export interface Sample { name: string; labels: Record<string, string>; value: number }
export interface Family { name: string; type: string; help: string; samples: Sample[] }

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const SUFFIXES: Record<string, string[]> = { histogram: ['_bucket', '_sum', '_count'], summary: ['', '_sum', '_count'] };

function parseValue(text: string, line: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`bad sample value ${JSON.stringify(text)} in: ${line}`);
  return Number(text);
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new Error(`bad labels in: ${line}`);
    const key = text.slice(i, eq).trim();
    if (!LABEL.test(key)) throw new Error(`bad label name ${JSON.stringify(key)} in: ${line}`);
    if (text[eq + 1] !== '"') throw new Error(`unquoted label value in: ${line}`);
    let j = eq + 2;
    let value = '';
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') {
        const n = text[++j];
        value += n === 'n' ? '\n' : n === '\\' ? '\\' : n === '"' ? '"' : (() => { throw new Error(`bad escape in: ${line}`); })();
      } else value += text[j];
    }
    if (j >= text.length) throw new Error(`unterminated label value in: ${line}`);
    if (key in labels) throw new Error(`duplicate label ${key} in: ${line}`);
    labels[key] = value;
    i = j + 1;
    if (text[i] === ',') i++;
    else if (i < text.length) throw new Error(`expected , between labels in: ${line}`);
  }
  return labels;
}

export function parsePrometheus(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const familyOf = (sample: string): Family | undefined => {
    for (const [name, f] of families) {
      const suffixes = SUFFIXES[f.type] ?? [''];
      if (suffixes.some((s) => sample === name + s)) return f;
    }
    return undefined;
  };
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) continue; // a plain comment
      const [, kind, name, rest] = m;
      if (!NAME.test(name)) throw new Error(`bad metric name in: ${line}`);
      const f = families.get(name) ?? { name, type: 'untyped', help: '', samples: [] };
      if (kind === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest)) throw new Error(`bad type in: ${line}`);
        if (f.samples.length > 0) throw new Error(`TYPE after samples in: ${line}`);
        f.type = rest;
      } else f.help = rest.replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
      families.set(name, f);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/.exec(line);
    if (!m) throw new Error(`malformed sample line: ${line}`);
    const family = familyOf(m[1]);
    if (!family) throw new Error(`sample of an undeclared family: ${line}`);
    family.samples.push({ name: m[1], labels: m[3] ? parseLabels(m[3], line) : {}, value: parseValue(m[4], line) });
  }
  for (const f of families.values()) {
    if (f.type !== 'histogram') continue;
    // Each histogram series: cumulative buckets ending at +Inf equal to its _count.
    const series = new Map<string, Sample[]>();
    for (const s of f.samples.filter((x) => x.name.endsWith('_bucket'))) {
      const { le, ...rest } = s.labels;
      if (le === undefined) throw new Error(`${f.name}: bucket without le`);
      const key = JSON.stringify(rest);
      series.set(key, [...(series.get(key) ?? []), s]);
    }
    for (const [key, buckets] of series) {
      for (let i = 1; i < buckets.length; i++) if (buckets[i].value < buckets[i - 1].value) throw new Error(`${f.name}${key}: buckets not cumulative`);
      const inf = buckets.find((b) => b.labels.le === '+Inf');
      const count = f.samples.find((x) => x.name === `${f.name}_count` && JSON.stringify(x.labels) === key);
      if (!inf || !count || inf.value !== count.value) throw new Error(`${f.name}${key}: +Inf bucket does not equal _count`);
    }
  }
  return families;
}

/** The value of one sample: the family's sample whose labels include all of `labels`. */
export function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}, sampleName = name): number | undefined {
  const f = families.get(name);
  return f?.samples.find((s) => s.name === sampleName && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}
