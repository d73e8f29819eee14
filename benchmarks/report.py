"""Tables and plots from benchmark result files: nothing here is typed by hand.

Reads the per-run JSON files `benchmarks/quality.py` wrote (and, when present, `speed.json` from
`benchmarks/speed.py`), and writes beside them `RESULTS.md` (mean ± std over seeds, delta vs the comparison's
baseline, whether the delta exceeds the seed spread), `summary.json` and `quality.png` (bars with std error bars).
With `--readme README.md` the README's section between that folder's markers (`<!-- results:cpu-small:start -->`
... `<!-- results:cpu-small:end -->` for `benchmarks/results/cpu-small`) is replaced by the same tables, so each
profile's section is regenerated from its own runs and the others stay as they are.

    python benchmarks/report.py benchmarks/results/cpu-small --readme README.md
"""

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo

from benchmarks.speed_siamese_matcher import format_table as siamese_table  # noqa: E402
from pairzoo.fileio import write_text_atomic  # noqa: E402
from pairzoo.hub_cards.results import load_runs, summarise  # noqa: E402

# The papers' own headline numbers, with their backbones and data: context, not pairzoo measurements.
PAPER_NUMBERS = [
    ("SEAVER", "C-STS test Spearman 43.83", "SimCSE-large cross-encoder"),
    ("CSR", "C-STS test Spearman 42.0 (tri-encoder)", "SimCSE-large"),
    ("Comateformer", "average 89.2 over its matching benchmarks", "RoBERTa-base"),
    ("RE2 + SFA", "QQP accuracy 90.97, 5.27M parameters", "GloVe embeddings"),
    ("Neighbor attention", "accuracy 85.0 / Recall@20 43.5 on 10% of SNLI", "frozen BERT-base"),
]


def quality_markdown(rows: list[dict]) -> str:
    """The quality table: one line per (comparison, dataset, arm)."""
    first = rows[0]
    caps = ", ".join(f"{k}={v}" for k, v in first["train_args"].items())
    hardware = first["hardware"]
    threads = " or ".join(str(t) for t in sorted({t for r in rows for t in r["torch_threads"]}))
    machine = hardware["cuda"] or f"CPU ({hardware['cpu_count']} cores, {threads} torch threads)"
    seeds = sorted({seed for r in rows for seed in r["seeds"]})
    commits = ", ".join(
        f"`{c[:12]}{'-dirty' if c.endswith('-dirty') else ''}`"
        for c in sorted({c for r in rows for c in r["git_commits"]})
    )
    lines = [
        f"Profile `{first['profile']}`, backbone `{first['backbone']}`, {machine}, seeds {seeds}, dev splits, "
        f"git {commits} (each run file names its own). Budget: {caps}; an arm trained otherwise says how.",
        "",
        "| comparison | data set | arm | metric | mean ± std | delta vs baseline | beyond seed spread |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        delta = "baseline" if r["delta"] is None else f"{r['delta']:+.2f}"
        if r["delta"] is None:
            beyond = ""
        elif r["beyond_spread"] is None:
            beyond = "n/a (1 seed)"
        else:
            beyond = "yes" if r["beyond_spread"] else "no"
        differs = {k: v for k, v in r["train_args"].items() if first["train_args"].get(k) != v}
        arm = r["arm"] + (f" ({', '.join(f'{k}={v}' for k, v in differs.items())})" if differs else "")
        value = (
            f"{r['mean']:.2f} ± {r['std']:.2f}"
            if len(r["seeds"]) > 1
            else f"{r['mean']:.2f} (seed {r['seeds'][0]} only)"
        )
        lines.append(f"| {r['comparison']} | {r['dataset']} | {arm} | {r['metric']} | {value} | {delta} | {beyond} |")
    lines.append("")
    lines.append("'Beyond seed spread': |delta| > std(arm) + std(baseline); unknown with a single seed.")
    return "\n".join(lines)


def speed_markdown(speed: dict) -> str:
    """The speed/memory targets table from `speed.json`, then the neighbor-attention step and the Siamese matchers'
    parameter/latency table when they were measured."""
    lines = [
        f"Speed and memory (`benchmarks/speed.py`, {speed['device']}, medians of {speed['repeats']} timed runs "
        "after warm-up, ratios measured in one process per comparison):",
        "",
        "| method | target | measured | met |",
        "|---|---|---|---|",
    ]
    for t in speed["targets"]:
        lines.append(f"| {t['method']} | {t['target']} | {t['measured']:.3g} | {'yes' if t['met'] else 'no'} |")
    step = speed.get("neighbor_attention_step")
    if step:
        wall, flops = step["wall_ratio_over_full"], step["flop_ratio_over_full"]
        lines += [
            "",
            "Neighbor attention's training step (`benchmarks/speed_neighbor_attention.py`,"
            f" batch {step['batch_size']}, length {step['length']}, neighbor layers {step['neighbor_layers']}):"
            f" {wall['neighbor']:.3g}x the wall time of full fine-tuning (BitFit {wall['bitfit']:.3g}x),"
            f" {flops['neighbor']:.3g}x its FLOPs; the neighbor search is"
            f" {step['neighbor_search_share_of_step_wall']:.1%} of the step's wall time and"
            f" {step['neighbor_search_share_of_step_flops']:.1%} of its FLOPs.",
        ]
    siamese = speed.get("siamese_latency")
    if siamese:
        lines += [
            "",
            "Siamese matchers and the MiniLM cross-encoder, per pair (`benchmarks/speed_siamese_matcher.py`):",
            "",
            siamese_table(siamese),
        ]
    return "\n".join(lines)


def papers_markdown() -> str:
    lines = [
        "The papers' own headline numbers (their backbones, data and budgets; not measured here):",
        "",
        "| method | paper reports | with |",
        "|---|---|---|",
    ]
    lines += [f"| {m} | {n} | {b} |" for m, n, b in PAPER_NUMBERS]
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """Bars (mean) with std error bars, one panel per (comparison, dataset, metric)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict = defaultdict(list)
    for r in rows:
        panels[(r["comparison"], r["dataset"], r["metric"])].append(r)
    cols = min(4, len(panels))
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 3.0 * nrows), squeeze=False)
    for ax, ((comparison, dataset, metric), panel) in zip(axes.flat, panels.items()):
        labels = [r["arm"] for r in panel]
        ax.bar(range(len(panel)), [r["mean"] for r in panel], yerr=[r["std"] for r in panel], capsize=4)
        ax.set_xticks(range(len(panel)), labels, rotation=30, ha="right", fontsize=7)
        ax.set_title(f"{comparison} / {dataset}", fontsize=9)
        ax.set_ylabel(metric, fontsize=8)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def update_readme(readme: Path, section: str, name: str) -> None:
    """Replace the text between the `name` results markers of `readme` with `section`."""
    start, end = f"<!-- results:{name}:start -->", f"<!-- results:{name}:end -->"
    text = readme.read_text()
    if start not in text or end not in text:
        raise ValueError(f"{str(readme)!r} has no {start} ... {end} markers.")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    write_text_atomic(readme, f"{head}{start}\n{section}\n{end}{tail}")


# Knowledge-graph arms (`pairzoo.train_kg` run folders `<arm>__seed<S>`) and the router-free arm each is compared with.
KG_ARMS = {"tri-hadamard": None, "tri-router": "tri-hadamard", "bi": None, "bi-router": "bi"}
KG_METRICS = ("mrr", "hits@1", "hits@3", "hits@10")


def load_kg_runs(kg_dir: Path) -> list[dict]:
    """The `metrics.json` of every `<kg_dir>/<arm>__seed<S>/` run folder, with its arm and seed."""
    runs = []
    for path in sorted(kg_dir.glob("*__seed*/metrics.json")):
        arm, seed = path.parent.name.rsplit("__seed", 1)
        try:
            runs.append({"arm": arm, "seed": int(seed), **json.loads(path.read_text())})
        except (ValueError, json.JSONDecodeError) as err:
            raise ValueError(f"KG run {str(path)!r} is not a `<arm>__seed<int>/metrics.json` file: {err}") from err
    if not runs:
        raise FileNotFoundError(f"no `<arm>__seed<S>/metrics.json` run folders in {str(kg_dir)!r}.")
    return runs


def kg_markdown(runs: list[dict]) -> str:
    """WN18RR dev link prediction per arm: mean ± std over seeds (x100), MRR delta against the router-free arm."""
    first = runs[0]["args"]
    seeds = sorted({r["seed"] for r in runs})
    lines = [
        f"`python -m pairzoo.train_kg --model csr --backbone {first['backbone']} --max_steps {first['max_steps']} "
        f"--batch_size {first['batch_size']} --max_length {first['max_length']} --eval_queries "
        f"{first['eval_queries']}` per arm and seed (seeds {seeds}); dev triples in both directions, filtered ranks "
        f"against all {runs[0]['dev']['num_entities']:,} entities.",
        "",
        "| arm | seeds | " + " | ".join(KG_METRICS) + " | MRR delta vs router-free | beyond seed spread |",
        "|---|---|" + "---|" * len(KG_METRICS) + "---|---|",
    ]
    stats = {}
    for arm in sorted({r["arm"] for r in runs}, key=lambda a: (list(KG_ARMS).index(a) if a in KG_ARMS else 99, a)):
        group = [r for r in runs if r["arm"] == arm]
        values = {m: [100 * r["dev"][m] for r in group] for m in KG_METRICS}
        stats[arm] = {m: (statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0) for m, v in values.items()}
        cells = [f"{mean:.2f} ± {std:.2f}" for mean, std in stats[arm].values()]
        base = KG_ARMS.get(arm)
        delta = beyond = ""
        if base in stats:
            (mean, std), (base_mean, base_std) = stats[arm]["mrr"], stats[base]["mrr"]
            delta = f"{mean - base_mean:+.2f}"
            beyond = "yes" if abs(mean - base_mean) > std + base_std else "no"
        lines.append(f"| {arm} | {len(group)} | " + " | ".join(cells) + f" | {delta} | {beyond} |")
    return "\n".join(lines)


def render(rows: list[dict], speed: "dict | None", image: str, kg: "str | None" = None) -> str:
    """The results Markdown: quality table and chart, WN18RR (when given), speed targets (when measured), the
    papers' numbers."""
    parts = ["### Quality", "", f"![quality bars with seed std]({image})", "", quality_markdown(rows)]
    if kg is not None:
        parts += ["", "### WN18RR link prediction (CSR)", "", kg]
    if speed is not None:
        parts += ["", "### Speed and memory", "", speed_markdown(speed)]
    parts += ["", "### The papers' numbers", "", papers_markdown()]
    return "\n".join(parts)


def build_report(results_dir: Path, readme: "Path | None" = None, kg_dir: "Path | None" = None) -> str:
    """Write RESULTS.md, summary.json and quality.png under `results_dir` (and the README section; with `kg_dir`,
    the WN18RR table too, also written to `<kg_dir>/RESULTS.md`); returns the Markdown of RESULTS.md."""
    rows = summarise(load_runs(results_dir))
    kg = None
    if kg_dir is not None:
        kg = kg_markdown(load_kg_runs(kg_dir))
        write_text_atomic(kg_dir / "RESULTS.md", kg + "\n")
    speed_path = results_dir / "speed.json"
    speed = json.loads(speed_path.read_text()) if speed_path.exists() else None
    plot(rows, results_dir / "quality.png")
    write_text_atomic(results_dir / "summary.json", json.dumps(rows, indent=2, default=str))
    markdown = render(rows, speed, "quality.png", kg)
    write_text_atomic(results_dir / "RESULTS.md", markdown + "\n")
    if readme is not None:
        image = os.path.relpath(results_dir / "quality.png", readme.resolve().parent)
        update_readme(readme, render(rows, speed, image, kg), results_dir.name)
    return markdown


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--readme", type=Path, default=None, help="README whose results section is regenerated")
    parser.add_argument("--kg_dir", type=Path, default=None, help="folder of `pairzoo.train_kg` runs <arm>__seed<S>")
    args = parser.parse_args(argv)
    try:
        kg_dir = args.kg_dir.resolve() if args.kg_dir else None
        print(build_report(args.results_dir.resolve(), args.readme, kg_dir))
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"error: {err}") from err


__all__ = ["build_report", "kg_markdown", "load_kg_runs", "render"]

if __name__ == "__main__":
    sys.exit(main())
