"""Token-level prefix caches: the radix tree and the router's global prefix index."""

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.cache.radix import RadixNode, RadixTree

__all__ = ["PrefixIndex", "RadixNode", "RadixTree"]
