"""The call's transition table raises a typed error on a move it does not allow — also
under `python -O`, which strips asserts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flowserve.core.lifecycle import TRANSITIONS, CallStatus, TransitionError, allowed
from flowserve.core.state import CallState
from flowserve.errors import FailureKind
from flowserve.types.work import LLMCall

# a finished call sent back to a queue: a bug the core must not carry on with
BAD_MOVE = """
from flowserve.core.lifecycle import CallStatus, TransitionError
from flowserve.core.state import CallState
from flowserve.types.work import LLMCall
cs = CallState.of(LLMCall(7, 1, "n", "s", "w", (1, 2, 3), 4, 4))
for to in (CallStatus.QUEUED, CallStatus.RELEASED, CallStatus.FINISHED):
    cs.move(to)
try:
    cs.move(CallStatus.QUEUED)
except TransitionError as e:
    print(type(e).__name__, e)
else:
    print("moved", cs.status.value)
"""


def call() -> CallState:
    return CallState.of(LLMCall(7, 1, "n", "s", "w", (1, 2, 3), 4, 4))


def test_a_move_the_table_allows_changes_the_status() -> None:
    cs = call()
    for to in (CallStatus.QUEUED, CallStatus.RELEASED, CallStatus.RUNNING, CallStatus.FINISHED):
        cs.move(to)
    assert cs.status is CallStatus.FINISHED


@pytest.mark.parametrize(("path", "bad"), [
    ((), CallStatus.RUNNING),  # a ready call never ran
    ((CallStatus.QUEUED, CallStatus.RELEASED, CallStatus.FINISHED), CallStatus.QUEUED),  # final
    ((CallStatus.FAILED,), CallStatus.CANCELLED),
])
def test_a_move_the_table_forbids_raises_a_typed_error(path: tuple[CallStatus, ...], bad: CallStatus) -> None:
    cs = call()
    for to in path:
        cs.move(to)
    before = cs.status
    with pytest.raises(TransitionError, match=f"call 7: no transition {before.value} → {bad.value}") as e:
        cs.move(bad)
    assert (e.value.frm, e.value.to, e.value.kind) == (before, bad, FailureKind.INTERNAL)
    assert cs.status is before and not allowed(before, bad)


def test_final_statuses_have_no_way_out() -> None:
    assert all(not TRANSITIONS[s] for s in CallStatus if s.final)


def test_the_error_is_raised_under_python_dash_o() -> None:
    out = subprocess.run([sys.executable, "-O", "-c", BAD_MOVE], capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == "TransitionError call 7: no transition finished → queued"
