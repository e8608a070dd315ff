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
    embedder: Literal["wordllama"] = "wordllama"
    dim: Literal[64, 128, 256, 512, 1024] = 256
    search_url: str | None = None
    search_key: str | None = None
    search_key_env: str | None = None
    search_count: int = Field(3, ge=1, le=20)
    search_timeout_s: float = Field(5.0, gt=0)

    def key(self) -> str | None:
        if self.search_key_env is None:
            return self.search_key
        if self.search_key_env not in os.environ:
            raise ConfigError(f"gateway.retrieval.search_key_env: environment variable {self.search_key_env!r} "
                              f"is not set")
        return os.environ[self.search_key_env]
