/** PgBouncer lives with the chaos run (bench/pgbouncer.ts), which restarts it as a fault too. */
export { PgBouncer, pgbouncerBinary } from '../../bench/pgbouncer.js';
