/** The primary + synchronous standby pair lives with the chaos run (bench/pg-pair.ts), which fails it over too. */
export { PgPair, pgBinaries, type PgPairOptions } from '../../bench/pg-pair.js';
