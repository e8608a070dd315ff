"""`gateway.retrieval`: which real components run the retrieval ops, and where the web
search service is.

```yaml
gateway:
  retrieval:
    dim: 256                       # WordLlama embedding dimension (64..1024)
    search_url: http://127.0.0.1:8300   # else the `url:` of the `kind: search` instance
    search_key_env: SEARCH_API_KEY # or search_key: ...
    search_count: 3
    search_timeout_s: 5
```
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field

from flowserve.errors import ConfigError
from flowserve.schema import Strict


class RetrievalSettings(Strict):
    """`gateway.retrieval`: the real components behind the retrieval ops."""

    embedder: Literal["wordllama"] = Field("wordllama", description="the embedding model (WordLlama, shipped "
                                           "with its package)")
    dim: Literal[64, 128, 256, 512, 1024] = Field(256, description="embedding dimension")
    search_url: str | None = Field(None, description="web search service (default: the `url:` of the "
                                   "`kind: search` instance)")
    search_key: str | None = Field(None, description="the search service's API key")
    search_key_env: str | None = Field(None, description="an environment variable holding the search key "
                                       "(instead of `search_key`)")
    search_count: int = Field(3, ge=1, le=20, description="results per web search")
    search_timeout_s: float = Field(5.0, gt=0, description="one web search request")

    def key(self) -> str | None:
        if self.search_key_env is None:
            return self.search_key
        if self.search_key_env not in os.environ:
            raise ConfigError(f"gateway.retrieval.search_key_env: environment variable {self.search_key_env!r} "
                              f"is not set")
        return os.environ[self.search_key_env]
