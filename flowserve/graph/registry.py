"""Workflow factories by name: how the core turns a query's `WorkflowRef` (plain data in
the `QueryArrived` event) into its workflow object. Drivers register the factories they
serve — the simulator its workload's plans and apps, the gateway its chat, program and
app workflows — and hand the registry to the core, as they own the `RunJob` registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from flowserve.errors import ConfigError, RequestError
from flowserve.graph.workflow import Workflow
from flowserve.types.work import WorkflowRef

WorkflowFactory = Callable[..., Workflow]


class WorkflowRegistry(Mapping[str, WorkflowFactory]):
    def __init__(self, factories: Mapping[str, WorkflowFactory] | None = None) -> None:
        self._factories: dict[str, WorkflowFactory] = {}
        for name, factory in (factories or {}).items():
            self.register(name, factory)

    def register(self, name: str, factory: WorkflowFactory) -> None:
        """Serve `WorkflowRef(name, args)` with `factory(*args)`; a name is registered once."""
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a workflow factory's name is a non-empty string, got {name!r}")
        if name in self._factories and self._factories[name] is not factory:
            raise ConfigError(f"workflow {name!r} is registered already")
        self._factories[name] = factory

    def build(self, ref: WorkflowRef) -> Workflow:
        """A fresh workflow object for the ref (raises what the factory raises)."""
        factory = self._factories.get(ref.name)
        if factory is None:
            known = ", ".join(sorted(self._factories)) or "none"
            raise RequestError(f"no workflow {ref.name!r} is registered (registered: {known})")
        return factory(*ref.args)

    def __getitem__(self, name: str) -> WorkflowFactory:
        return self._factories[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def __repr__(self) -> str:
        return f"WorkflowRegistry({sorted(self._factories)})"

