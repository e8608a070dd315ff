"""Benchmarks and experiments, each printing ratios measured side by side in one run and
writing JSON: the demo, the papers' experiments (Hexgen, Preble, Teola, LLM-in-SQL), live
benchmarks on real engines, and the simulator's own speed. Only the command line imports
them; what they are built from lives with the library (`flowserve.sim.evaluate`,
`flowserve.sim.compare`, `flowserve.workloads.mixes`, `flowserve.loadtest`)."""
