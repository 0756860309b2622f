import { findLibfaketime, skewedEnv as skewedEnvWith } from '../../bench/faketime.js';

export const LIBFAKETIME: string | undefined = findLibfaketime();

/** The environment that runs a process with its clock moved by `offset` (`+90s`, `-90s`, `+5m`). */
export function skewedEnv(offset: string): NodeJS.ProcessEnv {
  if (!LIBFAKETIME) throw new Error('libfaketime is not installed (apt-get install -y libfaketime)');
  const m = /^([+-])(\d+)([sm])$/.exec(offset);
  if (!m) throw new Error(`skew ${offset}: expected +Ns, -Ns, +Nm or -Nm`);
  return skewedEnvWith(LIBFAKETIME, Number(`${m[1]}${Number(m[2]) * (m[3] === 'm' ? 60 : 1)}`));
}
