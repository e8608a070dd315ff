"""flowserve: serve LLM applications on a heterogeneous cluster of LLM engines.

One sans-IO scheduler core (`flowserve.core`) is driven by two drivers: the
virtual-time simulator (`flowserve.sim`) and the live gateway.
"""

__version__ = "0.1.0"
