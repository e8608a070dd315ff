"""Token ids as the core passes them around: a tuple (hashable, immutable). The bottom of
the vocabulary: the workflow IR's prompts (`flowserve.graph.prompt`) and the core's work
items (`flowserve.types.work`) both read it."""

Tokens = tuple[int, ...]
