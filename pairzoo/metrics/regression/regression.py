"""Spearman and Pearson correlation (x100, as papers report them) and mean squared error of pair scores.

A local `evaluate` metric module of pairzoo (loaded from its path, offline). A correlation is undefined, and
returned as NaN, when the predictions or the references are constant or hold a NaN or infinite value (an infinite
prediction would otherwise still get a rank, and a plausible Spearman).
"""

import datasets
import evaluate
import numpy as np
from scipy.stats import pearsonr, spearmanr

_DESCRIPTION = __doc__
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of float): predicted scores, on the references' scale for `mse`.
    references (list of float): gold scores.
Returns:
    spearman (float): Spearman rank correlation x 100 (NaN if either side is constant or not finite).
    pearson (float): Pearson correlation x 100 (NaN if either side is constant or not finite).
    mse (float): mean squared error.
"""
_CITATION = """@article{spearman1904,
  title={The proof and measurement of association between two things},
  author={Spearman, Charles},
  journal={The American Journal of Psychology},
  volume={15}, number={1}, pages={72--101}, year={1904}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Regression(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("float64"), "references": datasets.Value("float64")}
            ),
        )

    def _compute(self, predictions, references) -> dict:
        predictions = np.asarray(predictions, dtype=np.float64)
        references = np.asarray(references, dtype=np.float64)
        if predictions.size < 2:
            raise ValueError(f"need at least 2 pairs, got {predictions.size}.")
        finite = bool(np.isfinite(predictions).all() and np.isfinite(references).all())
        undefined = not finite or np.ptp(predictions) == 0 or np.ptp(references) == 0
        nan = float("nan")
        return {
            "spearman": nan if undefined else float(spearmanr(predictions, references).statistic * 100),
            "pearson": nan if undefined else float(pearsonr(predictions, references).statistic * 100),
            "mse": float(np.mean((predictions - references) ** 2)),
        }
