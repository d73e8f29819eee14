"""Mean reciprocal rank and Hits@k of link-prediction ranks (filtered ranks, 1 = best).

A local `evaluate` metric module of pairzoo (loaded from its path, offline), for knowledge-graph completion.
"""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = __doc__
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): the rank of each query's answer among the candidates (1 = first).
    ks (list of int): the cut-offs of Hits@k (default 1, 3, 10).
Returns:
    mrr (float), hits@k (float): fractions in [0, 1].
"""
_CITATION = """@inproceedings{bordes2013translating,
  title={Translating Embeddings for Modeling Multi-relational Data},
  author={Bordes, Antoine and Usunier, Nicolas and Garcia-Duran, Alberto and Weston, Jason and Yakhnenko, Oksana},
  booktitle={Advances in Neural Information Processing Systems}, year={2013}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Ranking(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64")}),
        )

    def _compute(self, predictions, ks=(1, 3, 10)) -> dict:
        ranks = np.asarray(predictions, dtype=np.float64)
        if ranks.size == 0 or (ranks < 1).any():
            raise ValueError("ranks must be a non-empty list of integers >= 1.")
        return {"mrr": float((1.0 / ranks).mean()), **{f"hits@{k}": float((ranks <= k).mean()) for k in ks}}
