"""Hub export: model cards rendered from a template, self-contained export folders, and `push`."""

from .export import (
    export_model,
    load_export,
    render_model_card,
    run_without_pairzoo,
    score_exports_in_fresh_process,
    score_in_fresh_process,
    start_without_pairzoo,
    verify_export,
)
from .push import push

__all__ = [
    "export_model",
    "load_export",
    "push",
    "render_model_card",
    "run_without_pairzoo",
    "score_exports_in_fresh_process",
    "score_in_fresh_process",
    "start_without_pairzoo",
    "verify_export",
]
