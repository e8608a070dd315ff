"""The one error the retrieval components raise: the op fails with this reason."""

from __future__ import annotations


class RetrievalError(Exception):
    """A retrieval op cannot produce its result (bad input, service down or slow)."""
