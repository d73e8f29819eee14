"""pairzoo's metrics as local Hugging Face `evaluate` modules (`regression`, `classification`, `ranking`), loaded
from their path inside the package, so no Hub access is needed."""

from functools import cache
from pathlib import Path

METRICS = ("regression", "classification", "ranking")


@cache
def load_metric(name: str):
    """The `evaluate` module `name` (one of `METRICS`), loaded once per process from pairzoo's package folder."""
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; pairzoo's metrics: {list(METRICS)}.")
    import evaluate

    return evaluate.load(str(Path(__file__).parent / name / f"{name}.py"))


__all__ = ["METRICS", "load_metric"]
