"""Speed and memory of every method against its baseline, as ratios measured in one process per comparison.

For each comparison of `benchmarks/quality.py` (same arms, same backbone, random weights of the same shapes):
- inference latency at batch 1 and 32 and lengths 64/128/512 (rows truncated to the length), throughput;
- peak extra memory of one forward (CPU: a fresh subprocess per arm and shape, kernel high-water mark of the
  resident set reset right before the forward; CUDA: `torch.cuda.max_memory_allocated`);
- training-step time (forward, backward, AdamW step) at batch 16, length 128;
- trainable-parameter fraction.
Timings: one warm-up, then `--repeats` runs alternating between the arms (so load from other processes hits all
alike), medians; CUDA timings synchronise. Then the methods' own targets: the CSR grid (200 sentences x 20
conditions, cached tri-encoder vs bi-encoder; `benchmarks/speed_csr.py`), Comateformer's time/memory at batch 32,
length 128, SEAVER's time at batch 32, length 128, the Siamese matchers' per-pair latency against the MiniLM
cross-encoder (`benchmarks/speed_siamese_matcher.py`), neighbor attention's training step with its neighbor-search
share and trainable fraction of the backbone (`benchmarks/speed_neighbor_attention.py`, length 128). Everything
goes to `<output_dir>/speed.json`; `benchmarks/report.py` renders it.

    python benchmarks/speed.py --output_dir benchmarks/results/cpu-small

A bad flag (or an `--output_dir` that cannot be written) prints one line, `speed.py: error: ...`, and exits with status
2 before anything is measured (`pairzoo.console.run_command`).
"""

import argparse
import gc
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # run from a checkout without installing pairzoo
sys.path.insert(0, str(BENCH))

from quality import Arm, available_comparisons, environment, write_json_atomic  # noqa: E402

from benchmarks.timing import interleaved, medians, trainable_fraction  # noqa: E402
from pairzoo import create_model, list_models, load_tokenizer  # noqa: E402
from pairzoo.console import check_at_least, parse_flags, run_command  # noqa: E402
from pairzoo.fileio import check_output_folder  # noqa: E402
from pairzoo.registry import spec_for_model  # noqa: E402
from pairzoo.training.collators import make_collator  # noqa: E402
from pairzoo.zoo import MODEL_SPECS  # noqa: E402

LONG_1 = "Two women in red jackets are walking their dogs through a park in the early morning fog. " * 40
LONG_2 = "A man in a grey suit is running to catch a bus that is leaving the station downtown. " * 40
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class SpeedArguments:
    """The flags of `benchmarks/speed.py`."""

    output_dir: Path = field(default=BENCH / "results" / "cpu-small", metadata={"help": "where speed.json goes"})
    backbone: str = field(default="minilm", metadata={"help": "the backbone of every arm"})
    lengths: list[int] = field(default_factory=lambda: [64, 128, 512], metadata={"help": "tokens per row"})
    batch_sizes: list[int] = field(default_factory=lambda: [1, 32], metadata={"help": "rows per forward"})
    repeats: int = field(default=3, metadata={"help": "timed runs of each arm (median)"})
    only: list[str] | None = field(default=None, metadata={"help": "comparison names (default: all)"})
    no_memory: bool = field(default=False, metadata={"help": "skip the peak-memory subprocesses"})
    no_csr_grid: bool = field(default=False, metadata={"help": "skip the CSR cached-grid benchmark"})
    no_siamese: bool = field(default=False, metadata={"help": "skip the Siamese matcher latency benchmark"})
    # (internal) run in the subprocess that measures one arm's memory: the arm and shape as JSON
    memory_child: str | None = field(default=None, metadata={"help": argparse.SUPPRESS})

    def __post_init__(self) -> None:
        check_at_least(self, 1, "lengths", "batch_sizes", "repeats")


def build(arm: Arm, backbone: str) -> torch.nn.Module:
    """The arm's model with random weights (speed does not depend on their values), eval mode, on `DEVICE`."""
    torch.manual_seed(0)
    return create_model(arm.model, backbone=backbone, pretrained=False, **arm.overrides).to(DEVICE).eval()


def make_batch(model, tokenizer, batch_size: int, length: int, labels: bool = False) -> dict:
    """A batch of `batch_size` identical long rows truncated to `length` tokens, in the model's input format; with a
    condition only for the conditional-similarity models (the pair matchers reject one)."""
    row = {"sentence1": LONG_1, "sentence2": LONG_2}
    if spec_for_model(model).task == "conditional-similarity":
        row["condition"] = "The number of people."
    rows = [row] * batch_size
    if labels:
        rows = [{**r, "label": 1 if model.config.num_labels > 1 else 3.0} for r in rows]
    bounds = None if model.config.num_labels > 1 else (model.config.label_min, model.config.label_max)
    batch = make_collator(model, tokenizer, length, bounds)(rows)
    return {k: v.to(DEVICE) for k, v in batch.items()}


def time_forward(models: dict, batches: dict, repeats: int) -> dict:
    """Median forward seconds per arm (interleaved repeats after one warm-up each)."""
    calls = {label: (lambda m=model, b=batches[label]: m(**b)) for label, model in models.items()}
    with torch.inference_mode():
        return medians(interleaved(calls, 1, repeats))[0]


def time_train_step(models: dict, batches: dict, repeats: int) -> dict:
    """Median seconds of forward + backward + AdamW step per arm (the models are restored to eval mode after)."""
    optimizers = {}
    for label, model in models.items():
        optimizers[label] = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)

    def step(label: str) -> None:
        loss = models[label](**batches[label]).loss
        loss.backward()
        optimizers[label].step()
        optimizers[label].zero_grad()

    for model in models.values():
        model.train()
    wall = medians(interleaved({label: (lambda label=label: step(label)) for label in models}, 1, repeats))[0]
    for model in models.values():
        model.eval()
    return wall


def status_kib(field: str) -> int:
    """A `/proc/self/status` field in KiB (VmRSS: resident now, VmHWM: its high-water mark)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def memory_child(spec: dict) -> None:
    """(In a subprocess.) Print the peak extra memory (MiB) of one forward of `spec`'s arm and shape as JSON."""
    arm = Arm(spec["label"], spec["model"], spec["overrides"])
    model = build(arm, spec["backbone"])
    batch = make_batch(model, load_tokenizer(spec["backbone"]), spec["batch_size"], spec["length"])
    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        with torch.inference_mode():
            model(**batch)
        peak = torch.cuda.max_memory_allocated()
        print(json.dumps({"peak_extra_mib": (peak - before) / 2**20}))
        return
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset VmHWM: loading had its own, higher peak
    before = status_kib("VmRSS")
    with torch.inference_mode():
        model(**batch)
    print(json.dumps({"peak_extra_mib": (status_kib("VmHWM") - before) / 1024}))


def measure_memory(arm: Arm, backbone: str, batch_size: int, length: int) -> float:
    spec = {"label": arm.label, "model": arm.model, "overrides": arm.overrides, "backbone": backbone}
    spec.update(batch_size=batch_size, length=length)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}  # freed tensors leave the resident set at once
    proc = subprocess.run(
        [sys.executable, __file__, "--memory_child", json.dumps(spec)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory measurement of {arm.label} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["peak_extra_mib"]


def compare(comparison, backbone: str, lengths: list, batch_sizes: list, repeats: int, memory: bool) -> dict:
    """All measurements of one comparison, in this process (memory in subprocesses)."""
    tokenizer = load_tokenizer(backbone)
    models = {arm.label: build(arm, backbone) for arm in comparison.arms}
    base = comparison.baseline.label
    result: dict = {
        "comparison": comparison.name,
        "baseline": base,
        "trainable_fraction": {k: trainable_fraction(m) for k, m in models.items()},
        "latency": [],
    }
    for length in lengths:
        for batch_size in batch_sizes:
            batches = {k: make_batch(m, tokenizer, batch_size, length) for k, m in models.items()}
            seconds = time_forward(models, batches, repeats)
            row = {
                "length": length,
                "batch_size": batch_size,
                "seconds": seconds,
                "pairs_per_second": {k: batch_size / s for k, s in seconds.items()},
                "ratio": {k: s / seconds[base] for k, s in seconds.items()},
            }
            if memory and batch_size == max(batch_sizes):
                peak = {arm.label: measure_memory(arm, backbone, batch_size, length) for arm in comparison.arms}
                row["peak_extra_mib"] = peak
                row["memory_ratio"] = {k: v / peak[base] for k, v in peak.items()}
            result["latency"].append(row)
            print(json.dumps({"comparison": comparison.name, **row}), flush=True)
    batches = {k: make_batch(m, tokenizer, 16, 128, labels=True) for k, m in models.items()}
    step = time_train_step(models, batches, repeats)
    result["train_step"] = {"batch_size": 16, "length": 128, "seconds": step}
    result["train_step"]["ratio"] = {k: s / step[base] for k, s in step.items()}
    return result


def _row(result: dict, length: int, batch_size: int) -> "dict | None":
    return next((r for r in result["latency"] if r["length"] == length and r["batch_size"] == batch_size), None)


def _at_batch_32_length_128(results: dict, comparison: str, key: str, limit: float, target: str) -> list[dict]:
    """A `<= limit` target on the `key` ratio ("ratio": time, "memory_ratio") of every arm of `comparison` but its
    baseline, at batch 32, length 128, one row per arm; nothing when that shape was not measured."""
    row = _row(results[comparison], 128, 32) if comparison in results else None
    if row is None or key not in row:
        return []
    baseline = results[comparison].get("baseline")
    return [
        {
            "method": comparison,
            "target": f"{target} (batch 32, length 128)" + ("" if arm == comparison else f": {arm}"),
            "measured": measured,
            "met": measured <= limit,
        }
        for arm, measured in row[key].items()
        if arm != baseline
    ]


def _own_values(result: dict, path: "tuple[str, ...]", each: str) -> "list[tuple[str, float]]":
    """The values at `path` in a method's own speed result, each with the suffix naming the keys "*" matched."""
    found = [("", result)]
    for key in path:
        if key == "*":
            found = [(f"{name} ({each} {k})", value) for name, node in found for k, value in node.items()]
        else:
            found = [(name, node[key]) for name, node in found]
    return found


def targets(results: dict, own: "dict[str, dict | None]") -> list[dict]:
    """The methods' speed/memory targets (each method's `speed_targets` in `pairzoo.zoo`, in the registry's order):
    "time" and "memory" from the comparisons' `results`, the others from the method's own speed result in `own`
    (by method name; a method without one is skipped), with the measured values and whether they are met."""
    found = []
    for spec in MODEL_SPECS:
        for target in spec.speed_targets:
            if target.measure in ("time", "memory"):
                key = "ratio" if target.measure == "time" else "memory_ratio"
                found += _at_batch_32_length_128(results, target.comparison, key, target.limit, target.text)
                continue
            if not own.get(spec.name):
                continue
            for suffix, measured in _own_values(own[spec.name], target.measure, target.each):
                met = measured >= target.limit if target.at_least else measured <= target.limit
                found.append({"method": spec.name, "target": target.text + suffix, "measured": measured, "met": met})
    return found


def main(argv: "list[str] | None" = None) -> dict:
    """Measure every comparison (and the methods' own benchmarks) for the flags `argv`, write
    `<output_dir>/speed.json` and print the targets; returns what speed.json holds."""
    args = parse_flags(SpeedArguments, argv, __doc__.split("\n")[0])
    if args.memory_child:
        memory_child(json.loads(args.memory_child))
        return {}
    check_output_folder(args.output_dir, "--output_dir")
    comparisons = [c for c in available_comparisons() if not args.only or c.name in args.only]
    results = {}
    for comparison in comparisons:
        results[comparison.name] = compare(
            comparison, args.backbone, args.lengths, args.batch_sizes, args.repeats, not args.no_memory
        )
    csr = None
    if not args.no_csr_grid and (not args.only or any(name.startswith("csr") for name in args.only)):
        import speed_csr

        csr = speed_csr.main(
            ["--backbone", args.backbone, "--repeats", str(args.repeats), "--threads", str(torch.get_num_threads())]
        )
    siamese = None
    wanted = not args.only or any(name.startswith("siamese") for name in args.only)
    if not args.no_siamese and wanted and "siamese-matcher" in list_models():
        import speed_siamese_matcher

        siamese = speed_siamese_matcher.main(["--repeats", str(max(args.repeats, 5))])
    neighbor_step = None
    if "neighbor-attention" in results:
        import speed_neighbor_attention

        flags = ["--backbone", args.backbone, "--length", "128", "--repeats", str(args.repeats)]
        neighbor_step = speed_neighbor_attention.main([*flags, "--threads", str(torch.get_num_threads())])
    device = torch.cuda.get_device_name(0) if DEVICE == "cuda" else f"CPU, torch threads: {torch.get_num_threads()}"
    payload = {
        "device": device,
        "backbone": args.backbone,
        "repeats": args.repeats,
        "comparisons": results,
        "csr_grid": csr,
        "siamese_latency": siamese,
        "neighbor_attention_step": neighbor_step,
        "targets": targets(results, {"csr": csr, "siamese-matcher": siamese, "neighbor-attention": neighbor_step}),
        **environment(),
    }
    write_json_atomic(args.output_dir / "speed.json", payload)
    for target in payload["targets"]:
        verdict = "met" if target["met"] else "NOT met"
        print(f"{target['method']}: {target['target']}: {target['measured']:.3g} -> {verdict}")
    return payload


if __name__ == "__main__":
    sys.exit(run_command("speed.py", main))
