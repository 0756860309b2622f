import type { Logger } from '../logger.js';
import { CallAbortedError, CredentialInvalidError, ProtocolError } from './client.js';
import { MissingRegistrationTokenError } from './identity.js';
import { RunnerLockedError } from './lock.js';
import { prepareRunner, RunnerSetupError, type RunnerSettings } from './start.js';

/** Something the operator must fix before the runner can start: one line, exit 2. */
export class RunnerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunnerConfigError';
  }
}

/**
 * The runner process: register or reload the identity, run the agent until a signal, and map how
 * it ended to an exit code (0 clean stop, 1 credential invalid). Setup problems throw
 * RunnerConfigError.
 */
export async function runRunner(settings: RunnerSettings, log: Logger, outputGone?: AbortSignal): Promise<number> {
  const setupAbort = new AbortController();
  let agentStop: (() => void) | undefined;
  let unlockName: (() => void) | undefined;
  let outputStopped = false;
  const onSignal = (sig: NodeJS.Signals) => {
    log.info({ signal: sig }, `${sig} received`);
    if (agentStop) agentStop();
    else setupAbort.abort();
  };
  // Output gone: one graceful stop (running steps keep their grace); a later signal ends them.
  const onOutputGone = () => {
    if (outputStopped) return;
    outputStopped = true;
    if (agentStop) agentStop();
    else setupAbort.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  outputGone?.addEventListener('abort', onOutputGone, { once: true });
  try {
    let prepared;
    try {
      prepared = await prepareRunner(settings, log, setupAbort.signal);
    } catch (err) {
      if (err instanceof CallAbortedError) return 0;
      if (err instanceof RunnerSetupError || err instanceof MissingRegistrationTokenError || err instanceof RunnerLockedError) throw new RunnerConfigError(err.message);
      if (err instanceof CredentialInvalidError) throw new RunnerConfigError(`registration refused by ${err.server}: the registration token is not valid`);
      if (err instanceof ProtocolError && err.path === 'register' && err.status === 409) throw new RunnerConfigError(`registration refused: ${err.message.replace(/^register: HTTP 409: /, '')}`);
      throw err;
    }
    const { agent, identity, identityFile, registered, servers, name, workDir, unlock } = prepared;
    unlockName = unlock;
    agentStop = () => agent.stop();
    if (setupAbort.signal.aborted) return 0;
    if (outputGone?.aborted) onOutputGone();
    log.info(
      { runner_id: identity.runnerId, name, servers, identity: identityFile, work_dir: workDir, max_parallel_steps: settings.maxParallelSteps },
      registered ? `runner ${name} registered as ${identity.runnerId}; polling ${servers[0]}` : `runner ${name} (${identity.runnerId}) resumed its identity; polling ${servers[0]}`,
    );
    try {
      await agent.run();
    } catch (err) {
      if (err instanceof CredentialInvalidError) {
        log.error(
          { runner_id: identity.runnerId, identity: identityFile, server: err.server },
          `credential invalid: ${err.server} no longer knows runner ${identity.runnerId}. Its registration is gone; move ${identityFile} away and start the runner with a registration token to register anew`,
        );
        return 1;
      }
      throw err;
    }
    log.info({ completed: agent.stats.completed, released: agent.stats.released, lost: agent.stats.lost }, 'runner stopped');
    return 0;
  } finally {
    unlockName?.();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    outputGone?.removeEventListener('abort', onOutputGone);
  }
}
