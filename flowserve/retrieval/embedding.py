"""Text embeddings with WordLlama (the 256-dim `l2_supercat` weights and its tokenizer
ship inside the `wordllama` wheel, so nothing is downloaded), and token chunking with
the same (Llama-2) tokenizer.

WordLlama's own loader looks for the tokenizer in a folder the wheel does not have and
then tries Hugging Face; pointing its cache at the package folder finds both files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flowserve.retrieval.errors import RetrievalError

DIM = 256


@dataclass(frozen=True)
class Embedded:
    """Texts with their unit-length embeddings (row i embeds texts[i])."""

    texts: tuple[str, ...]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        assert self.vectors.ndim == 2 and self.vectors.shape[0] == len(self.texts), self.vectors.shape

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @staticmethod
    def concat(parts: list[Embedded]) -> Embedded:
        dims = {p.dim for p in parts}
        if len(dims) > 1:
            raise RetrievalError(f"cannot join embeddings of different dimensions {sorted(dims)}")
        return Embedded(tuple(t for p in parts for t in p.texts),
                        np.concatenate([p.vectors for p in parts]) if parts else np.zeros((0, DIM), np.float32))


def load_tokenizer() -> Any:
    """WordLlama's (Llama-2) tokenizer from the wheel, without loading the weights."""
    import wordllama
    from tokenizers import Tokenizer

    folder = Path(wordllama.__file__).parent / "tokenizers"
    files = sorted(folder.glob("*.json"))
    if not files:
        raise RetrievalError(f"no tokenizer file in {folder} (is wordllama installed?)")
    return Tokenizer.from_file(str(files[0]))


class Embedder:
    """WordLlama, offline; `embed` returns L2-normalised float32 rows."""

    def __init__(self, dim: int = DIM) -> None:
        import wordllama
        from wordllama import WordLlama

        self.dim = dim
        self._model: Any = WordLlama.load(dim=dim, cache_dir=Path(wordllama.__file__).parent)
        self.tokenizer = self._model.tokenizer

    def embed(self, texts: list[str] | tuple[str, ...]) -> Embedded:
        texts = tuple(texts)
        if not all(isinstance(t, str) for t in texts):
            raise RetrievalError("embed: every text must be a string")
        if not texts:
            return Embedded((), np.zeros((0, self.dim), np.float32))
        v = np.asarray(self._model.embed(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        return Embedded(texts, v / np.where(norms > 0, norms, 1.0))

    def chunk(self, text: str, size: int, overlap: int) -> list[str]:
        return chunk_tokens(text, self.tokenizer, size, overlap)


def chunk_tokens(text: str, tokenizer: Any, size: int, overlap: int) -> list[str]:
    """Overlapping windows of `size` tokens, consecutive ones sharing `overlap` tokens
    (LlamaIndex's sentence splitter without the sentence snapping), cut on the token
    offsets so each chunk is a slice of the original text."""
    assert 0 <= overlap < size, (size, overlap)
    offsets = [(a, b) for a, b in tokenizer.encode(text, add_special_tokens=False).offsets if b > a]
    if not offsets:
        return []
    step = size - overlap
    out = []
    for i in range(0, max(len(offsets) - overlap, 1), step):
        window = offsets[i:i + size]
        out.append(text[window[0][0]:window[-1][1]].strip())
    return [c for c in out if c]
