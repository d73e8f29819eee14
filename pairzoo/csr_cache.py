"""Save and load CSR caches (`ConditionCache`, `SentenceCache`) as safetensors files with their metadata.

Kept outside the modeling file because modeling files may import only torch and transformers.
"""

import os
from dataclasses import fields
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from .modeling.common import non_finite_tensors
from .modeling.modeling_csr import ConditionCache, SentenceCache

_KINDS = {"condition": ConditionCache, "sentence": SentenceCache}


def _shape_problem(kind: str, tensors: "dict") -> "str | None":
    """What makes `tensors` of a `kind` cache inconsistent (None: nothing): a sentence cache is `hidden_states`
    (N, L, d) floating point and `attention_mask` (N, L) of 0/1; a condition cache is `queries` (N, T, d) and
    `features` (N, d or 0), both floating point."""
    if kind == "sentence":
        hidden, mask = tensors["hidden_states"], tensors["attention_mask"]
        if hidden.dim() != 3 or mask.dim() != 2 or tuple(hidden.shape[:2]) != tuple(mask.shape):
            shapes = f"hidden_states {tuple(hidden.shape)} and attention_mask {tuple(mask.shape)}"
            return f"{shapes} must be (N, L, d) and (N, L)"
        if not hidden.is_floating_point():
            return f"hidden_states must be floating point, got {hidden.dtype}"
        if not bool(((mask == 0) | (mask == 1)).all()):
            return "attention_mask must hold only 0 and 1"
        return None
    queries, features = tensors["queries"], tensors["features"]
    if queries.dim() != 3 or features.dim() != 2 or queries.shape[0] != features.shape[0]:
        return f"queries {tuple(queries.shape)} and features {tuple(features.shape)} must be (N, T, d) and (N, d or 0)"
    if not (queries.is_floating_point() and features.is_floating_point()):
        return f"queries and features must be floating point, got {queries.dtype} and {features.dtype}"
    return None


def save_cache(cache: "ConditionCache | SentenceCache", path: "str | os.PathLike") -> Path:
    """Write `cache` (tensors and metadata) to the safetensors file `path`; a cache holding a non-finite (NaN or
    infinite) value or tensors of inconsistent shapes (see `_shape_problem`) is a ValueError naming the tensors,
    before anything is written."""
    if not isinstance(cache, (ConditionCache, SentenceCache)):
        raise ValueError(f"expected a ConditionCache or SentenceCache, got {type(cache).__name__}.")
    path = Path(path)
    tensors = {name: tensor.detach().contiguous().cpu() for name, tensor in cache.tensors().items()}
    problem = _shape_problem("sentence" if isinstance(cache, SentenceCache) else "condition", tensors)
    if problem:
        raise ValueError(f"cannot save to {str(path)!r}: the cache's {problem}.")
    bad = non_finite_tensors(tensors)
    if bad:
        raise ValueError(
            f"cannot save to {str(path)!r}: cache tensors {bad} hold non-finite (NaN or infinite) values."
        )
    save_file(tensors, str(path), metadata={str(k): str(v) for k, v in cache.metadata.items()})
    return path


def load_cache(path: "str | os.PathLike") -> "ConditionCache | SentenceCache":
    """Read a cache written by `save_cache`; its metadata lets `CsrModel.embed` reject a mismatched model.

    A file that is not a readable safetensors file (truncated, corrupt), is not a CSR cache (its metadata `kind`),
    lacks the tensors of its kind, holds tensors of inconsistent shapes (see `_shape_problem`) or holds a non-finite
    (NaN or infinite) value is a ValueError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"cache file {str(path)!r} does not exist.")
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = dict(handle.metadata() or {})
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except Exception as err:  # safetensors raises its own error types for corrupt headers and short files
        raise ValueError(f"cache file {str(path)!r} is corrupt or unreadable: {err}.") from err
    kind = metadata.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"{str(path)!r} is not a CSR cache (metadata kind {kind!r}).")
    expected = sorted(field.name for field in fields(_KINDS[kind]) if field.name != "metadata")
    if sorted(tensors) != expected:
        raise ValueError(f"cache file {str(path)!r} holds tensors {sorted(tensors)}; a {kind} cache holds {expected}.")
    problem = _shape_problem(kind, tensors)
    if problem:
        raise ValueError(f"cache file {str(path)!r} is corrupt: its {problem}.")
    bad = non_finite_tensors(tensors)
    if bad:
        raise ValueError(
            f"cache file {str(path)!r} is corrupt: tensors {bad} hold non-finite (NaN or infinite) values."
        )
    return _KINDS[kind](**tensors, metadata=metadata)


__all__ = ["load_cache", "save_cache"]
