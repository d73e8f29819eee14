"""Save and load CSR caches (`ConditionCache`, `SentenceCache`) as safetensors files with their metadata.

Kept outside the modeling file because modeling files may import only torch and transformers.
"""

import os
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from .modeling.modeling_csr import ConditionCache, SentenceCache

_KINDS = {"condition": ConditionCache, "sentence": SentenceCache}


def save_cache(cache: "ConditionCache | SentenceCache", path: "str | os.PathLike") -> Path:
    """Write `cache` (tensors and metadata) to the safetensors file `path`."""
    if not isinstance(cache, (ConditionCache, SentenceCache)):
        raise ValueError(f"expected a ConditionCache or SentenceCache, got {type(cache).__name__}.")
    path = Path(path)
    tensors = {name: tensor.detach().contiguous().cpu() for name, tensor in cache.tensors().items()}
    save_file(tensors, str(path), metadata={str(k): str(v) for k, v in cache.metadata.items()})
    return path


def load_cache(path: "str | os.PathLike") -> "ConditionCache | SentenceCache":
    """Read a cache written by `save_cache`; its metadata lets `CsrModel.embed` reject a mismatched model."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"cache file {str(path)!r} does not exist.")
    with safe_open(str(path), framework="pt") as handle:
        metadata = dict(handle.metadata() or {})
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    kind = metadata.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"{str(path)!r} is not a CSR cache (metadata kind {kind!r}).")
    return _KINDS[kind](**tensors, metadata=metadata)


__all__ = ["load_cache", "save_cache"]
