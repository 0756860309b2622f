import { Config, Errors } from '@oclif/core';
import { ROOT, type CliResult } from './cli.js';

let config: Promise<Config> | undefined;

/**
 * Runs a verb of the built CLI (dist/, as `npm test` builds it) inside this process, the way
 * bin/run.js would, capturing stdout and stderr and the exit code: a spawn costs a second or two
 * of oclif start-up on a loaded machine, this costs milliseconds. One verb at a time per process.
 */
export async function runInProcess(args: string[], input?: string): Promise<CliResult> {
  const cfg = await (config ??= Config.load(ROOT));
  // The command id is the longest run of leading words that names a command.
  let n = args.findIndex((a) => a.startsWith('-'));
  if (n < 0) n = args.length;
  while (n > 0 && !cfg.findCommand(args.slice(0, n).join(':'))) n--;
  if (n === 0) throw new Error(`no command in ${args.join(' ')}`);
  const id = args.slice(0, n).join(':');
  let stdout = '';
  let stderr = '';
  const out = process.stdout.write;
  const err = process.stderr.write;
  const { log, error } = console;
  // oclif writes through console.log / console.error, NDJSON through process.stdout.
  console.log = (...a: unknown[]) => void (stdout += `${a.map(String).join(' ')}\n`);
  console.error = (...a: unknown[]) => void (stderr += `${a.map(String).join(' ')}\n`);
  process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += String(chunk)), true)) as typeof process.stderr.write;
  let code = 0;
  try {
    if (input !== undefined) throw new Error('stdin input needs a spawned CLI (runCli)');
    await cfg.runCommand(id, args.slice(n));
  } catch (e) {
    if (e instanceof Errors.ExitError) code = e.oclif.exit ?? 1;
    else {
      code = (e as { oclif?: { exit?: number } }).oclif?.exit ?? 1;
      stderr += `${(e as Error).message}\n`;
    }
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
    console.log = log;
    console.error = error;
  }
  return { code, stdout, stderr };
}
