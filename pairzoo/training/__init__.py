"""Training: data loaders, the synthetic generator, collators, metrics and the `Trainer`-based CLI.

What a plain `transformers.Trainer` needs to train a pairzoo model (see `pairzoo.training.collators`):
`tokenize_dataset` (a `datasets.Dataset` of texts as the model's inputs and `labels`), `make_collator` (the batches),
`compute_metrics_fn` (Spearman/Pearson/MSE or accuracy/F1) and `align_special_tokens`.
"""

from .collators import align_special_tokens, make_collator, tokenize_dataset
from .metrics import compute_metrics_fn

__all__ = ["align_special_tokens", "compute_metrics_fn", "make_collator", "tokenize_dataset"]
