"""Calibration against real engines: profile an engine and fit the cost model
(`profiler`), replay a workload on it and in the simulator and compare (`validate`,
`replay`, `live_trace`, `fidelity`), and statistics of recorded traces (`traces`)."""
