import type { Hook } from '@oclif/core';
import { closestCommand } from '../core/suggest.js';
import { EXIT } from './errors.js';

/**
 * An unknown verb names the closest one and exits 2 (usage), in a terminal and in a pipe alike.
 * It never asks to run the guess: with a yes default, Enter would pull whatever lever was
 * closest to a typo.
 */
const hook: Hook<'command_not_found'> = async function (opts) {
  const words = opts.id.split(':');
  // With a space as topic separator, the words after the unknown part arrive as argv.
  const typed = [...words, ...(opts.argv ?? []).filter((a) => !a.startsWith('-'))];
  const commands = opts.config.commands.filter((c) => !c.hidden).map((c) => c.id.split(':'));
  const guess = closestCommand(typed, commands);
  const shown = guess ? typed.slice(0, guess.length).join(' ') : words.join(' ');
  const topic = opts.config.findTopic(words[0]) ? ` ${words[0]}` : guess && guess.length > 1 ? ` ${guess[0]}` : '';
  process.stderr.write(`Error: '${shown}' is not an ${opts.config.bin} command.${guess ? ` Did you mean '${guess.join(' ')}'?` : ''}\n`);
  process.stderr.write(`See '${opts.config.bin}${topic} --help' for the list.\n`);
  this.exit(EXIT.usage);
};

export default hook;
