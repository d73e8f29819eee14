"""The model test harness every pairzoo model passes, on tiny random BERT and RoBERTa backbones.

Subclass `ModelHarness` in a `test_*.py` file, set `model_name` (and `config_overrides` for a variant), and override
`make_inputs` when the model's inputs are not the cross-encoder's. Checks: forward shapes; loss and backward with a
gradient on every trainable parameter; save/load round trip; Auto-class round trip (both equal up to float32 rounding);
padding invariance; determinism under a fixed seed (bitwise); the Hub export loaded in a fresh process without
pairzoo, offline.
"""

import atexit
import json
import queue
import subprocess
import threading

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, set_seed

import pairzoo
from pairzoo import create_model, encode_conditional_inputs, get_model_spec, load_tokenizer
from pairzoo.hub_cards import export_model, start_without_pairzoo, verify_export

ROWS = [
    {
        "sentence1": "Two women in red jackets are walking in a park.",
        "sentence2": "A man is running.",
        "condition": "The number of people.",
        "label": 2.0,
    },
    {
        "sentence1": "A child in a green hat is reading in a library at night, dressed in green.",
        "sentence2": "Three students are eating in a kitchen in the morning while talking loudly about the weather.",
        "condition": "The activity.",
        "label": 4.5,
    },
    {"sentence1": "A man cycles.", "sentence2": "A man cycles on a beach.", "condition": "The place.", "label": 1.0},
]


def assert_close_after_reload(actual: torch.Tensor, expected: torch.Tensor, msg: "str | None" = None) -> None:
    """Float32 outputs computed after a save/load, in another process, after a resume or with another thread count:
    equal up to float32 rounding (atol 1e-6, rtol 1e-5), not bitwise.

    Which kernel path computes a sum (vector width, FMA, blocking, the split over threads) depends on the CPU, on the
    thread count and on the memory alignment of the weights (`from_pretrained` leaves them at their offsets in the
    safetensors file, not 64-byte aligned like fresh tensors), so the last bits may differ: 1.5e-8 on an AMD EPYC for a
    reloaded model, nothing on others. A real fault (a weight not loaded, a config field lost) is orders larger.
    """
    torch.testing.assert_close(actual, expected, atol=1e-6, rtol=1e-5, msg=msg)


# One process without pairzoo serves every harness class's export (a job per line on stdin, a result line on stdout):
# a new process per export would import torch and transformers again each time. Each export is its own folder,
# and transformers re-executes a remote-code module whose files differ from the cached one.
_FRESH_FORWARD = r"""
import json, sys, traceback
import torch, transformers
from safetensors.torch import load_file, save_file
for line in sys.stdin:
    folder, inputs_file, outputs_file, auto_class, output_key = json.loads(line)
    try:
        model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval()
        assert "pairzoo" not in sys.modules
        with torch.no_grad():
            out = model(**load_file(inputs_file))
        save_file({"primary": out[output_key].contiguous()}, outputs_file)
        print("FRESH_FORWARD " + json.dumps(None), flush=True)
    except Exception:
        print("FRESH_FORWARD " + json.dumps(traceback.format_exc()), flush=True)
"""
_FRESH_FORWARD_TIMEOUT = 300
# the process and a queue its output lines arrive on (a reader thread: `select` would not see lines already buffered)
_fresh_forward_process: "list[tuple[subprocess.Popen, queue.Queue]]" = []


def _start_fresh_forward() -> "tuple[subprocess.Popen, queue.Queue]":
    proc = start_without_pairzoo(_FRESH_FORWARD)
    atexit.register(proc.kill)
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)  # the process ended

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def fresh_forward(folder: str, inputs_file: str, outputs_file: str, auto_class: str, output_key: str) -> None:
    """Load export `folder` with `auto_class` in the process without pairzoo and write its forward's `output_key`
    on the inputs in `inputs_file` to `outputs_file`; its traceback (or its last output) fails the test."""
    if not _fresh_forward_process or _fresh_forward_process[0][0].poll() is not None:
        _fresh_forward_process[:] = [_start_fresh_forward()]
    proc, lines = _fresh_forward_process[0]
    proc.stdin.write(json.dumps([folder, inputs_file, outputs_file, auto_class, output_key]) + "\n")
    proc.stdin.flush()
    seen = []
    while True:
        try:
            line = lines.get(timeout=_FRESH_FORWARD_TIMEOUT)
        except queue.Empty:
            proc.kill()
            pytest.fail(f"no answer from the process without pairzoo in {_FRESH_FORWARD_TIMEOUT} s")
        if line is None:
            pytest.fail("the process without pairzoo ended: " + "".join(seen)[-3000:])
        if line.startswith("FRESH_FORWARD "):
            error = json.loads(line[len("FRESH_FORWARD ") :])
            assert error is None, error[-3000:]
            return
        seen.append(line)


# Exports whose loading as a user loads them (`verify_export`: Auto classes, tokenizer, the card's pipelines) has
# been checked in this session, by what that check depends on; variants of a family that differ only in options
# share it, and each still runs its forward without pairzoo.
_verified_exports: set = set()


def verify_export_once(folder) -> None:
    config = json.loads((folder / "config.json").read_text())
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text()).get("tokenizer_class")
    key = json.dumps([config["model_type"], config["auto_map"], config.get("custom_pipelines"), tokenizer])
    if key not in _verified_exports:
        verify_export(folder)
        _verified_exports.add(key)


class ModelHarness:
    """Mixin of shared model tests; the subclass names the registered model to test."""

    model_name: str = ""
    config_overrides: dict = {}
    output_key: str = "logits"
    atol: float = 1e-5

    # ---------------------------------------------------------------- hooks a subclass may override

    def make_model(self, backbone: str, **overrides):
        set_seed(0)
        return create_model(self.model_name, backbone=backbone, **{**self.config_overrides, **overrides})

    def make_inputs(self, tokenizer, rows: list[dict], model) -> dict:
        """Model inputs (with `labels`) for `rows`, padded to the longest row."""
        batch = encode_conditional_inputs(
            tokenizer, [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [r["condition"] for r in rows]
        )
        labels = [r["label"] for r in rows]
        if model.config.num_labels > 1:
            labels = [int(label) % model.config.num_labels for label in labels]
        batch["labels"] = torch.tensor(labels)
        return batch

    def primary(self, output) -> torch.Tensor:
        return output[self.output_key]

    # ---------------------------------------------------------------- fixtures

    @pytest.fixture(params=["tiny-bert", "tiny-roberta"])
    def backbone(self, request) -> str:
        return request.param

    @pytest.fixture()
    def tokenizer(self, backbone):
        return load_tokenizer(backbone)

    @pytest.fixture()
    def model(self, backbone):
        return self.make_model(backbone).eval()

    @pytest.fixture()
    def inputs(self, tokenizer, model) -> dict:
        return self.make_inputs(tokenizer, ROWS, model)

    # ---------------------------------------------------------------- the checks

    def test_forward_shapes(self, model, inputs):
        out = model(**inputs)
        batch = inputs["input_ids"].shape[0]
        primary = self.primary(out)
        assert primary.shape[0] == batch
        if model.config.num_labels > 1:
            assert primary.shape == (batch, model.config.num_labels)
        assert torch.isfinite(primary).all()
        assert out.loss is not None and out.loss.ndim == 0 and torch.isfinite(out.loss)

    def test_loss_backward_reaches_every_trainable_parameter(self, model, inputs):
        model.train()
        model(**inputs).loss.backward()
        missing = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]
        # embeddings of tokens absent from the batch get no gradient by construction; everything else must
        missing = [n for n in missing if "embeddings" not in n]
        assert not missing, f"no gradient reached: {missing}"

    def test_save_load_round_trip(self, model, inputs, tmp_path):
        model.save_pretrained(tmp_path)
        reloaded = type(model).from_pretrained(tmp_path).eval()
        with torch.no_grad():
            assert_close_after_reload(self.primary(reloaded(**inputs)), self.primary(model(**inputs)))

    def test_auto_class_round_trip(self, model, inputs, tmp_path):
        import transformers

        model.save_pretrained(tmp_path)
        config = AutoConfig.from_pretrained(tmp_path)
        assert type(config) is type(model.config)
        auto = getattr(transformers, get_model_spec(self.model_name).auto_class)
        reloaded = auto.from_pretrained(tmp_path).eval()
        assert type(reloaded) is type(model)
        with torch.no_grad():
            assert_close_after_reload(self.primary(reloaded(**inputs)), self.primary(model(**inputs)))

    def test_padding_invariance(self, model, tokenizer):
        short = ROWS[2]
        alone = self.make_inputs(tokenizer, [short], model)
        padded = self.make_inputs(tokenizer, [short, ROWS[1]], model)
        assert padded["attention_mask"][0].sum() < padded["attention_mask"].shape[1], "batch must pad row 0"
        with torch.no_grad():
            torch.testing.assert_close(
                self.primary(model(**padded))[0], self.primary(model(**alone))[0], rtol=0, atol=self.atol
            )

    def test_determinism_under_seed(self, backbone, tokenizer):
        def one_step() -> torch.Tensor:
            model = self.make_model(backbone).train()
            set_seed(123)
            inputs = self.make_inputs(tokenizer, ROWS, model)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            model(**inputs).loss.backward()
            optimizer.step()
            model.eval()
            with torch.no_grad():
                return self.primary(model(**inputs))

        # Bitwise: one process, one thread count, two models built and trained the same way.
        torch.testing.assert_close(one_step(), one_step(), rtol=0, atol=0)

    def test_hub_export_loads_without_pairzoo(self, model, tokenizer, inputs, tmp_path):
        folder = export_model(model, tokenizer, tmp_path / "export", eval_results=[])
        verify_export_once(folder)
        names = {p.name for p in folder.iterdir()}
        assert {"config.json", "model.safetensors", "README.md"} <= names
        assert not any(n.endswith((".bin", ".pt", ".pkl")) for n in names)
        config = json.loads((folder / "config.json").read_text())
        assert set(config["auto_map"]) >= {"AutoConfig", get_model_spec(self.model_name).auto_class}
        features = {k: v.contiguous() for k, v in inputs.items() if k != "labels"}
        in_file, out_file = str(tmp_path / "inputs.safetensors"), str(tmp_path / "outputs.safetensors")
        save_file(features, in_file)
        fresh_forward(str(folder), in_file, out_file, get_model_spec(self.model_name).auto_class, self.output_key)
        with torch.no_grad():
            expected = self.primary(model(**features))
        torch.testing.assert_close(load_file(out_file)["primary"], expected, rtol=0, atol=self.atol)


__all__ = ["ROWS", "ModelHarness", "assert_close_after_reload", "pairzoo"]
