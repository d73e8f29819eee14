"""Mean reciprocal rank and Hits@k of link-prediction ranks (filtered ranks, 1 = best).

A local `evaluate` metric module of pairzoo (loaded from its path, offline), for knowledge-graph completion. Ranks may
be fractional: a target tied with other candidates gets the mean of its optimistic and pessimistic rank (the realistic
protocol of Sun et al. 2020), e.g. 3.5, and Hits@k counts a rank <= k.
"""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = __doc__
_KWARGS_DESCRIPTION = """
Args:
    predictions (list of float): the rank of each query's answer among the candidates (1 = first; a tied answer's
        realistic rank may be a half-integer).
    ks (list of int): the cut-offs of Hits@k (default 1, 3, 10).
Returns:
    mrr (float), hits@k (float): fractions in [0, 1].
"""
_CITATION = """@inproceedings{bordes2013translating,
  title={Translating Embeddings for Modeling Multi-relational Data},
  author={Bordes, Antoine and Usunier, Nicolas and Garcia-Duran, Alberto and Weston, Jason and Yakhnenko, Oksana},
  booktitle={Advances in Neural Information Processing Systems}, year={2013}
}
@inproceedings{sun2020reevaluation,
  title={A Re-evaluation of Knowledge Graph Completion Methods},
  author={Sun, Zhiqing and Vashishth, Shikhar and Sanyal, Soumya and Talukdar, Partha and Yang, Yiming},
  booktitle={Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics}, year={2020}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Ranking(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("float64")}),
        )

    def _compute(self, predictions, ks=(1, 3, 10)) -> dict:
        ranks = np.asarray(predictions, dtype=np.float64)
        if ranks.size == 0 or not (np.isfinite(ranks) & (ranks >= 1)).all():
            raise ValueError("ranks must be a non-empty list of finite numbers >= 1.")
        return {"mrr": float((1.0 / ranks).mean()), **{f"hits@{k}": float((ranks <= k).mean()) for k in ks}}
