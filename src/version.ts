import { readFileSync } from 'node:fs';

/** The package version, read once from package.json next to dist/ or src/. */
export const VERSION: string = (() => {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      return JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')).version as string;
    } catch {
      // try the next layout
    }
  }
  return '0.0.0';
})();
