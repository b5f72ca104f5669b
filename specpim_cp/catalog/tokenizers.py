"""Tokenizer identity: which catalog tokenizer a config's (model_type, vocab_size) is, and which names are one.

A drafter must share its verifier's tokenizer. Identity is the family's vocabulary and its real token count,
not the embedding's padded row count (formulations/acceptance.md, [ACC-5]); the known tokenizers, their
padded sizes and their other names are data, `tokenizers.toml`, each with a source.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

__all__ = ["KnownTokenizer", "known_tokenizers", "same_tokenizer", "tokenizer_for", "tokenizer_identity"]


@dataclass(frozen=True)
class KnownTokenizer:
    """A tokenizer the catalog knows: the model types that use it, its real token count, the padded
    vocab_size values its releases ship, other names it has had, and where these come from."""

    name: str
    model_types: tuple[str, ...]
    tokens: int
    vocab_sizes: tuple[int, ...]
    aliases: tuple[str, ...]
    source: str

    def fits(self, model_type: str, vocab_size: int) -> bool:
        """A config of `model_type` with `vocab_size` embedding rows uses this tokenizer: its type is listed
        and its rows hold the real tokens, padded at most to the largest size a release ships."""
        return model_type in self.model_types and self.tokens <= vocab_size <= max(self.vocab_sizes)


@lru_cache(maxsize=1)
def known_tokenizers() -> tuple[KnownTokenizer, ...]:
    """The shipped table, `catalog/tokenizers.toml`."""
    text = resources.files("specpim_cp.catalog").joinpath("tokenizers.toml").read_text(encoding="utf-8")
    return tuple(KnownTokenizer(name, tuple(e["model_types"]), int(e["tokens"]), tuple(e["vocab_sizes"]),
                                tuple(e.get("aliases", ())), e["source"])
                 for name, e in tomllib.loads(text)["tokenizers"].items())


def tokenizer_for(model_type: str, vocab_size: int) -> KnownTokenizer | None:
    """The known tokenizer of a config (its model_type and padded vocab_size), or None."""
    return next((t for t in known_tokenizers() if t.fits(model_type, vocab_size)), None)


def tokenizer_identity(name: str) -> str:
    """The canonical name of tokenizer `name` (an alias maps to its tokenizer; any other name is itself)."""
    for t in known_tokenizers():
        if name == t.name or name in t.aliases:
            return t.name
    return name


def same_tokenizer(a: str, b: str) -> bool:
    """Tokenizers `a` and `b` are one (the same name, or names of one known tokenizer)."""
    return a == b or tokenizer_identity(a) == tokenizer_identity(b)
