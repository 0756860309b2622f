import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { Invalid } from '../errors.js';
import { applyOverrides, RUN_FILE_MAX_BYTES, runFileParse, runFileValueParse, validateRunFile, type RunDefinition, type RunFileProblem } from '../core/runfile.js';

export { RUN_FILE_MAX_BYTES } from '../core/runfile.js';

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
 * A run file's text from a path, or from stdin for `-`, refused (Invalid) when it is larger
 * than RUN_FILE_MAX_BYTES: a file by its size before anything is read, stdin as soon as it passes.
 */
export function runFileRead(file: string, maxBytes = RUN_FILE_MAX_BYTES): string {
  const where = file === '-' ? 'stdin' : file;
  const tooBig = () => new Invalid(`${where}: larger than ${maxBytes / 1024} KiB; a run file is refused above that size`, 'invalid_run_file');
  let fd: number;
  try {
    fd = file === '-' ? 0 : openSync(file, 'r');
  } catch (err) {
    throw new Invalid(`cannot read ${where}: ${(err as Error).message}`);
  }
  try {
    const st = fstatSync(fd);
    if (st.isFile() && st.size > maxBytes) throw tooBig();
    if (st.isDirectory()) throw new Invalid(`cannot read ${where}: it is a directory`);
    const chunks: Buffer[] = [];
    let total = 0;
    const buf = Buffer.alloc(64 * 1024);
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, buf, 0, buf.length, null);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') continue;
        if ((err as NodeJS.ErrnoException).code === 'EOF') break;
        throw new Invalid(`cannot read ${where}: ${(err as Error).message}`);
      }
      if (n === 0) break;
      total += n;
      if (total > maxBytes) throw tooBig();
      chunks.push(Buffer.from(buf.subarray(0, n)));
    }
    return Buffer.concat(chunks).toString('utf8');
  } finally {
    if (file !== '-') closeSync(fd);
  }
}

/**
 * Reads a run file's text (YAML, or JSON which is YAML too), applies `--set` overrides and
 * validates it. Throws RunFileInvalid with every problem; returns nothing half-checked.
 */
export function runFileLoad(text: string, sets: string[] = []): LoadedRunFile {
  const parsed = runFileParse(text);
  if (!parsed.ok) throw new RunFileInvalid(parsed.problems);
  const { raw, problems: setProblems } = applyOverrides(parsed.raw, sets, runFileValueParse);
  const result = validateRunFile(raw);
  const problems = [...setProblems, ...(result.ok ? [] : result.problems)];
  if (!result.ok || problems.length) throw new RunFileInvalid(problems);
  return { definition: result.definition, source: raw as Record<string, unknown> };
}
