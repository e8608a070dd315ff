"""Errors that carry a message meant for the user (CLI exit code 2, HTTP 4xx)."""


class FlowserveError(Exception):
    """Base class: the message names the problem precisely."""


class ConfigError(FlowserveError):
    """Malformed or inconsistent configuration (cluster, workload, policy)."""


class WorkflowError(FlowserveError):
    """A workflow graph that cannot run: cycle, unknown dependency, duplicate node."""


class RequestError(FlowserveError):
    """A request the cluster cannot serve as given (prompt longer than the context, ...)."""
