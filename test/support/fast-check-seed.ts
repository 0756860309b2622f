import fc from 'fast-check';

// Property tests run with one fixed seed so a run is reproducible; set OPSCHAIN_FC_SEED to explore
// other inputs (a failure prints the seed that reproduces it).
fc.configureGlobal({ seed: Number(process.env.OPSCHAIN_FC_SEED ?? 20261201) });
