"""Benchmarks and experiments, each printing ratios measured side by side in one run and
writing JSON: the demo, the papers' experiments (Hexgen, Preble, Teola, LLM-in-SQL), the
policy comparison, live benchmarks on real engines, and the simulator's own speed."""
