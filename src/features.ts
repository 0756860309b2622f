import type { Feature } from './server.js';

/** The features every production replica runs, in start order. */
export function serverFeatures(): Feature[] {
  return [];
}
