import { LineCounter, parseDocument, parse as parseYaml } from 'yaml';
import { Invalid } from '../errors.js';
import { applyOverrides, validateRunFile, type RunDefinition, type RunFileProblem } from '../core/runfile.js';

/** A run file refused whole: every problem, each at its path. */
export class RunFileInvalid extends Invalid {
  constructor(readonly problems: RunFileProblem[]) {
    super(`run file refused (${problems.length} problem${problems.length === 1 ? '' : 's'})`, 'invalid_run_file', { problems });
    this.name = 'RunFileInvalid';
  }
}

export interface LoadedRunFile {
  definition: RunDefinition;
  /** The file as submitted, after overrides: what `runs.definition` keeps. */
  source: Record<string, unknown>;
}

/**
 * Reads a run file's text (YAML, or JSON which is YAML too), applies `--set` overrides and
 * validates it. Throws RunFileInvalid with every problem; returns nothing half-checked.
 */
export function runFileLoad(text: string, sets: string[] = []): LoadedRunFile {
  // Duplicate keys and syntax errors come back as document errors rather than a throw.
  const lines = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter: lines });
  if (doc.errors.length) {
    throw new RunFileInvalid(
      doc.errors.map((e) => {
        const pos = lines.linePos(e.pos[0]);
        return { path: `(file) line ${pos.line} column ${pos.col}`, message: e.message.split('\n')[0] };
      }),
    );
  }
  const parsed = doc.toJS({ maxAliasCount: 100 }) as unknown;
  const { raw, problems: setProblems } = applyOverrides(parsed, sets, (t) => parseYaml(t));
  const result = validateRunFile(raw);
  const problems = [...setProblems, ...(result.ok ? [] : result.problems)];
  if (!result.ok || problems.length) throw new RunFileInvalid(problems);
  return { definition: result.definition, source: raw as Record<string, unknown> };
}
