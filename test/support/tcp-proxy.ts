/** The fault proxy lives with the chaos tier (bench/fault-proxy.ts); tests use it as a TCP proxy in front of PostgreSQL. */
export { FaultProxy as TcpProxy, type ProxyMode } from '../../bench/fault-proxy.js';
