"""Metrics and reports, a library for the benchmarks, calibration, the CLI and the tests:
simulation metrics (`summary`: SLO attainment, minimum SLO scale, latency percentiles,
per-stage distributions), report tables and JSON (`tables`) and plots (`plots`)."""
