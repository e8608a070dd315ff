"""Workloads: seeded generators and trace replays that yield queries with arrival times.

Each kind is a config model (`config`, the YAML `kind:`) that builds a `Workload`
(`base`); `registry.load_workload` reads a built-in name, a YAML file or a recorded trace.
"""

from flowserve.workloads.base import QuerySpec, Workload
from flowserve.workloads.registry import BUILTIN_WORKLOADS, WORKLOAD_KINDS, load_workload, workload_config

__all__ = ["BUILTIN_WORKLOADS", "WORKLOAD_KINDS", "QuerySpec", "Workload", "load_workload", "workload_config"]
