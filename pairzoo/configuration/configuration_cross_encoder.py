"""Configuration of the C-STS cross-encoder baseline (Deshpande et al. 2023, princeton-nlp/c-sts)."""

from .common import LabelledConfig, check_choice


class CrossEncoderConfig(LabelledConfig):
    r"""
    Hyper-parameters of [`CrossEncoderForConditionalSimilarity`]: one encoder reads `s1 SEP s2 SEP c` as a single
    sequence, its first-token (or mean) feature of the last layer goes through an optional transform and a linear head.

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the encoder (BERT, RoBERTa, XLM-RoBERTa, DeBERTa-v2/v3, ELECTRA, MPNet, DistilBERT, ModernBERT
            or ALBERT), stored inside this config so `from_pretrained(dir)` rebuilds the model offline. Required to
            build a model.
        use_transform (`bool`, *optional*, defaults to `False`):
            Insert the c-sts "transform" (dropout, Linear(d, d), the backbone's activation) before the head; the
            reference scripts default to `False`.
        pooling (`str`, *optional*, defaults to `"cls"`):
            Feature read by the head: `"cls"` (first token, the paper's choice) or `"mean"` (mean over non-padding
            tokens).
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout of the transform; `None` uses the backbone's hidden dropout, as the reference code does.
        label_min (`float`, *optional*, defaults to 1.0):
            Lowest label of the regression scale; labels are mapped to [0, 1] for the MSE loss and predictions back.
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label of the regression scale.
        num_labels (`int`, *optional*, defaults to 1):
            1 gives regression (MSE); more gives classification (cross-entropy).
    """

    model_type = "cross-encoder"

    use_transform: bool = False
    pooling: str = "cls"
    classifier_dropout: float | None = None

    def validate_pooling(self) -> None:
        check_choice("pooling", self.pooling, ("cls", "mean"))


__all__ = ["CrossEncoderConfig"]
