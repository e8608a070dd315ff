"""The policy contract, as policies import it: the base classes live in the core that
calls them (`flowserve.core.policy`); this module names them for policies written
against `flowserve.policies.base`."""

from flowserve.core.policy import BINDINGS, NO_STATS, Ahead, Binding, DispatchPolicy, QueueFactory, QueuePolicy

__all__ = ["BINDINGS", "NO_STATS", "Ahead", "Binding", "DispatchPolicy", "QueueFactory", "QueuePolicy"]
