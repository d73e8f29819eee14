"""Tables and plots from benchmark result files: nothing here is typed by hand.

Reads the per-run JSON files `benchmarks/quality.py` wrote (and, when present, `speed.json` from
`benchmarks/speed.py`), and writes beside them `RESULTS.md` (mean ± std over seeds, delta vs the comparison's
baseline, whether the delta exceeds the seed spread), `summary.json` and `quality.png` (bars with std error bars).
With `--readme docs/results.md` (any markdown file) the file's section between that folder's markers
(`<!-- results:cpu-small:start -->` ... `<!-- results:cpu-small:end -->` for `benchmarks/results/cpu-small`) is
replaced by the same tables, so each profile's section is regenerated from its own runs and the others stay as they
are; `--readme_heading TEXT` adds the section (heading and markers, after the last results section) when the file
has none yet.

Runs of the peer profiles (`cpu-full`, `gpu`) get one table per comparison with two more columns: the
sentence-transformers CrossEncoder's mean ± std on the same data set and metric, and the delta against it, from
`--peers` (default `../shared/reference/peers_minilm.json`, beside the clone, never copied into it); without that
file the table says the columns were left out.

    python benchmarks/report.py benchmarks/results/cpu-small --readme docs/results.md
    python benchmarks/report.py benchmarks/results/cpu-full --readme docs/results.md \\
        --readme_heading 'Results, `cpu-full` profile (the peer budget)'

Bad input (a missing or malformed results file, a README without its markers) prints one line,
`report.py: error: ...`, and exits with status 2 before anything is written (`pairzoo.console.run_command`).
"""

import json
import os
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo

from benchmarks.quality import PEER_PROFILES, REPO, device_label  # noqa: E402
from benchmarks.speed_siamese_matcher import format_table as siamese_table  # noqa: E402
from pairzoo.console import parse_flags, run_command  # noqa: E402
from pairzoo.fileio import write_text_atomic  # noqa: E402
from pairzoo.hub_cards.results import load_peers, load_runs, summarise  # noqa: E402
from pairzoo.zoo import MODEL_SPECS  # noqa: E402
from pairzoo.zoo.csr import KG_ARMS  # noqa: E402

# sentence-transformers CrossEncoder numbers on the same MiniLM, kept outside the repository, by the clone
PEERS_LABEL = "../shared/reference/peers_minilm.json"
PEERS_PATH = REPO.parent / "shared" / "reference" / "peers_minilm.json"

# The papers' own headline numbers, with their backbones and data (each method's `paper_numbers`, in its module of
# `pairzoo.zoo`): context, not pairzoo measurements.
PAPER_NUMBERS = [row for spec in MODEL_SPECS for row in spec.paper_numbers]


def provenance(rows: list[dict]) -> str:
    """Where the rows' runs come from: profile, backbone, machine, seeds, git commits."""
    first = rows[0]
    hardware = first["hardware"]
    threads = " or ".join(str(t) for t in sorted({t for r in rows for t in r["torch_threads"]}))
    machine = device_label(hardware, f"CPU ({hardware['cpu_count']} cores, {threads} torch threads)")
    seeds = sorted({seed for r in rows for seed in r["seeds"]})
    commits = ", ".join(
        f"`{c[:12]}{'-dirty' if c.endswith('-dirty') else ''}`"
        for c in sorted({c for r in rows for c in r["git_commits"]})
    )
    return (
        f"Profile `{first['profile']}`, backbone `{first['backbone']}`, {machine}, seeds {seeds}, dev splits, "
        f"git {commits} (each run file names its own)."
    )


def seed_value(row: dict, seeds: "list[int] | None" = None) -> str:
    """`mean ± std` over the row's seeds (naming them when they are not `seeds`, the table's), or the single seed's
    value saying so; seeds where the metric was undefined (left out of the mean) are named."""
    if len(row["seeds"]) == 1:
        value = f"{row['mean']:.2f} (seed {row['seeds'][0]} only)"
    elif seeds is not None and row["seeds"] != seeds:
        value = f"{row['mean']:.2f} ± {row['std']:.2f} (seeds {', '.join(map(str, row['seeds']))} only)"
    else:
        value = f"{row['mean']:.2f} ± {row['std']:.2f}"
    undefined = row.get("undefined_seeds")
    return value + (f" (undefined at seed {', '.join(map(str, undefined))})" if undefined else "")


def quality_markdown(rows: list[dict]) -> str:
    """The quality table: one line per (comparison, dataset, arm)."""
    first = rows[0]
    caps = ", ".join(f"{k}={v}" for k, v in first["train_args"].items())
    lines = [
        f"{provenance(rows)} Budget: {caps}; an arm trained otherwise says how.",
        "",
        "| comparison | data set | arm | metric | mean ± std | delta vs baseline | beyond seed spread |",
        "|---|---|---|---|---|---|---|",
    ]
    seeds = sorted({seed for r in rows for seed in r["seeds"]})
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
        value = seed_value(r, seeds)
        lines.append(f"| {r['comparison']} | {r['dataset']} | {arm} | {r['metric']} | {value} | {delta} | {beyond} |")
    lines.append("")
    lines.append("'Beyond seed spread': |delta| > std(arm) + std(baseline); unknown with a single seed.")
    return "\n".join(lines)


def _delta(value: float, std: float, base: float, base_std: float, spread_known: bool) -> str:
    """A signed difference, marked ` *` beyond the two spreads, or saying the spread is unknown."""
    delta = value - base
    if not spread_known:
        return f"{delta:+.2f} (1 seed)"
    return f"{delta:+.2f}" + (" *" if abs(delta) > std + base_std else "")


def peer_recipe(dataset: str, entry: dict) -> str:
    """One data set's peer recipe, as the peer file states it."""
    keys = ("split", "epochs", "batch", "lr", "max_length", "train_rows", "loss")
    recipe = ", ".join(f"{k} {entry[k]}" for k in keys if k in entry)
    return (
        f"{dataset}: {entry['mean']:.2f} ± {entry['std']:.2f} {entry['metric']} over seeds {entry['seeds']} ({recipe})"
    )


def comparison_markdown(rows: list[dict], peers: "dict | None", peers_label: str) -> str:
    """One table per comparison: per data set and arm, mean ± std over seeds, the delta against the comparison's
    baseline and, where the peer file has the data set and metric, the sentence-transformers CrossEncoder's mean ±
    std and the delta against it (only when the runs are on `minilm`, the peer's backbone: its task-adapted arms
    excepted); `*` marks a delta beyond the seed spread (|delta| > the sum of the two stds)."""
    off_minilm = sorted({r["backbone"] for r in rows if not r["adapted"] and r["backbone"] != "minilm"})
    if off_minilm:
        peers = None
    common = {k: v for k, v in rows[0]["train_args"].items() if all(r["train_args"].get(k) == v for r in rows)}
    budget = ", ".join(f"{k}={v}" for k, v in common.items())
    baselines = {(r["comparison"], r["dataset"], r["metric"]): r for r in rows if r["baseline"]}
    seeds = sorted({seed for r in rows for seed in r["seeds"]})
    header = "| data set | arm | training | metric | mean ± std | delta vs baseline |"
    if peers is not None:
        header += " peer CrossEncoder | delta vs peer |"
    parts = [f"{provenance(rows)} Budget of every run: {budget}; the training column lists what a row adds to it."]
    for comparison in dict.fromkeys(r["comparison"] for r in rows):
        lines = [header, "|---" * header.count(" | ") + "|---|"]
        for r in (r for r in rows if r["comparison"] == comparison):
            training = ", ".join(f"{k}={v}" for k, v in r["train_args"].items() if k not in common)
            delta = "baseline"
            if r["delta"] is not None:
                base = baselines[comparison, r["dataset"], r["metric"]]
                delta = _delta(r["mean"], r["std"], base["mean"], base["std"], r["beyond_spread"] is not None)
            cells = [r["dataset"], r["arm"], training, r["metric"], seed_value(r, seeds), delta]
            peer = (peers or {}).get(r["dataset"])
            if peer is not None and r["main"] and peer["metric"] == r["metric"]:
                known = len(r["seeds"]) > 1 and len(peer["seeds"]) > 1
                cells += [f"{peer['mean']:.2f} ± {peer['std']:.2f}"]
                cells += [_delta(r["mean"], r["std"], peer["mean"], peer["std"], known)]
            elif peers is not None:
                cells += ["", ""]
            lines.append("| " + " | ".join(cells) + " |")
        parts += [f"#### {comparison}", "\n".join(lines)]
    parts.append(
        "`*`: |delta| > std(row) + std(baseline or peer), beyond the seed spread; '(1 seed)': spread unknown."
    )
    if off_minilm:
        parts.append(
            f"Peer columns left out: the runs are on `{off_minilm[0]}`, the peer numbers in `{peers_label}` on the "
            "bundled MiniLM (`minilm`)."
        )
    elif peers is None:
        parts.append(
            f"Peer columns left out: `{peers_label}` was not found (the sentence-transformers reference numbers sit "
            "outside the repository, in the shared folder beside the clone)."
        )
    else:
        recipes = "\n".join(f"- {peer_recipe(d, e)}" for d, e in peers.items())
        parts.append(
            "Peer: sentence-transformers `CrossEncoder` on the same MiniLM weights and dev splits, from "
            f"`{peers_label}` (sample std over seeds):\n\n{recipes}"
        )
    return "\n\n".join(parts)


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


def readme_with_section(text: str, section: str, name: str, heading: "str | None" = None) -> str:
    """`text` (a README) with the part between its `name` results markers replaced by `section`. Without the
    markers: with `heading`, a new `## heading` section holding them goes after the last results section (or at the
    end); without, a ValueError."""
    start, end = f"<!-- results:{name}:start -->", f"<!-- results:{name}:end -->"
    if start not in text or end not in text:
        if heading is None:
            raise ValueError(f"the README has no {start} ... {end} markers (pass a heading to add them).")
        ends = list(re.finditer(r"<!-- results:[^ ]+:end -->\n?", text))
        cut = ends[-1].end() if ends else len(text)
        head, tail = text[:cut].rstrip("\n"), text[cut:].lstrip("\n")
        return f"{head}\n\n## {heading}\n\n{start}\n{section}\n{end}\n" + (f"\n{tail}" if tail else "")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{section}\n{end}{tail}"


KG_METRICS = ("mrr", "hits@1", "hits@3", "hits@10")
# `pairzoo.train_kg` flags the table's command line names (with `--bf16` and a time budget when a run used them).
KG_COMMAND_FLAGS = ("max_steps", "batch_size", "learning_rate", "max_length", "eval_queries")
# `pairzoo.train_kg` arguments that may differ between the runs of one table: where a run wrote and read, its seed,
# and its arm's configuration (the same within an arm).
KG_PER_RUN_ARGS = ("output_dir", "data_dir", "seed", "config_overrides")


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


def _kg_command(args: dict) -> str:
    """The `pairzoo.train_kg` command line of a run's arguments (the flags the table compares runs by)."""
    flags = [f"--{name} {args[name]}" for name in KG_COMMAND_FLAGS if args.get(name) is not None]
    if args.get("max_train_seconds"):
        flags.append(f"--max_train_seconds {args['max_train_seconds']:g}")
    if args.get("bf16"):
        flags.append("--bf16")
    return f"python -m pairzoo.train_kg --model csr --backbone {args['backbone']} " + " ".join(flags)


def kg_markdown(runs: list[dict]) -> str:
    """WN18RR dev link prediction per arm: mean ± std over seeds (x100), the training steps run, MRR delta against
    the router-free arm. Runs that trained otherwise (any argument but `KG_PER_RUN_ARGS`, or an arm's configuration)
    than the first are a ValueError: the table gives one command line for all."""
    first = runs[0]
    for run in runs:
        shared = {k for k in {*first["args"], *run["args"]} if k not in KG_PER_RUN_ARGS}
        differ = sorted(k for k in shared if run["args"].get(k) != first["args"].get(k))
        same_arm = next(r for r in runs if r["arm"] == run["arm"])
        if run["args"].get("config_overrides") != same_arm["args"].get("config_overrides"):
            differ.append("config_overrides")
        if differ:
            raise ValueError(
                f"KG run {run['arm']}__seed{run['seed']} trained with other {differ} than "
                f"{first['arm']}__seed{first['seed']} or its arm's other seeds: one table needs one recipe."
            )
    seeds = sorted({r["seed"] for r in runs})
    devices = sorted({r.get("environment", {}).get("device", "?") for r in runs})
    lines = [
        f"`{_kg_command(first['args'])}` per arm and seed (seeds {seeds}; {', '.join(devices)}); dev triples in both "
        f"directions, filtered ranks against all {first['dev']['num_entities']:,} entities.",
    ]
    if first["args"].get("max_train_seconds"):
        lines[0] += (
            f" Training stopped after {first['args']['max_train_seconds']:g} s (`--max_train_seconds`): the steps "
            "column gives how many each run trained, and the learning rate had not decayed to zero."
        )
    lines += [
        "",
        "| arm | seeds | steps | " + " | ".join(KG_METRICS) + " | MRR delta vs router-free | beyond seed spread |",
        "|---|---|---|" + "---|" * len(KG_METRICS) + "---|---|",
    ]
    stats = {}
    for arm in sorted({r["arm"] for r in runs}, key=lambda a: (list(KG_ARMS).index(a) if a in KG_ARMS else 99, a)):
        group = [r for r in runs if r["arm"] == arm]
        values = {m: [100 * r["dev"][m] for r in group] for m in KG_METRICS}
        stats[arm] = {m: (statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0) for m, v in values.items()}
        cells = [f"{mean:.2f} ± {std:.2f}" for mean, std in stats[arm].values()]
        steps = " / ".join(str(r["train_steps"]) if "train_steps" in r else "?" for r in group)
        base = KG_ARMS[arm].router_free if arm in KG_ARMS else None
        delta = beyond = ""
        if base in stats:
            (mean, std), (base_mean, base_std) = stats[arm]["mrr"], stats[base]["mrr"]
            delta = f"{mean - base_mean:+.2f}"
            if min(len(group), len({r["seed"] for r in runs if r["arm"] == base})) < 2:
                beyond = "one seed: no spread"
            else:
                beyond = "yes" if abs(mean - base_mean) > std + base_std else "no"
        lines.append(f"| {arm} | {len(group)} | {steps} | " + " | ".join(cells) + f" | {delta} | {beyond} |")
    return "\n".join(lines)


def render(
    rows: list[dict],
    speed: "dict | None",
    image: str,
    kg: "str | None" = None,
    peers: "dict | None" = None,
    peers_label: str = PEERS_LABEL,
) -> str:
    """The results Markdown: quality table (one per comparison, with the peer columns, for the peer profiles) and
    chart, WN18RR (when given), speed targets (when measured), the papers' numbers."""
    if rows[0]["profile"] in PEER_PROFILES:
        quality = comparison_markdown(rows, peers, peers_label)
    else:
        quality = quality_markdown(rows)
    parts = ["### Quality", "", f"![quality bars with seed std]({image})", "", quality]
    if kg is not None:
        parts += ["", "### WN18RR link prediction (CSR)", "", kg]
    if speed is not None:
        parts += ["", "### Speed and memory", "", speed_markdown(speed)]
    parts += ["", "### The papers' numbers", "", papers_markdown()]
    return "\n".join(parts)


def build_report(
    results_dir: Path,
    readme: "Path | None" = None,
    kg_dir: "Path | None" = None,
    peers_path: Path = PEERS_PATH,
    readme_heading: "str | None" = None,
) -> str:
    """Write RESULTS.md, summary.json and quality.png under `results_dir` (and the README section, added under
    `readme_heading` when missing; with `kg_dir`, the WN18RR table too, also written to `<kg_dir>/RESULTS.md`); the
    peer columns come from `peers_path` when it exists. Returns the Markdown of RESULTS.md. Nothing is written when
    an input is bad: among them, run files of several profiles, or of several backbones (task-adapted arms aside), in
    one folder, since its tables compare every arm with one baseline under one provenance line."""
    runs = load_runs(results_dir)
    for name, values in (
        ("profile", {r["profile"] for r in runs}),
        ("backbone", {r["backbone"] for r in runs if not r.get("adaptation")}),
    ):
        if len(values) > 1:
            raise ValueError(
                f"the run files in {str(results_dir / 'runs')!r} come from several {name}s {sorted(values)}: one "
                "results folder per profile and backbone."
            )
    rows = summarise(runs)
    peers = load_peers(peers_path)
    label = PEERS_LABEL if peers_path == PEERS_PATH else str(peers_path)
    kg = kg_markdown(load_kg_runs(kg_dir)) if kg_dir is not None else None
    speed_path = results_dir / "speed.json"
    speed = json.loads(speed_path.read_text()) if speed_path.exists() else None
    markdown = render(rows, speed, "quality.png", kg, peers, label)
    readme_text = None
    if readme is not None:
        image = os.path.relpath(results_dir / "quality.png", readme.resolve().parent)
        section = render(rows, speed, image, kg, peers, label)
        readme_text = readme_with_section(readme.read_text(), section, results_dir.name, readme_heading)
    if kg is not None:
        write_text_atomic(kg_dir / "RESULTS.md", kg + "\n")
    plot(rows, results_dir / "quality.png")
    write_text_atomic(results_dir / "summary.json", json.dumps(rows, indent=2, default=str))
    write_text_atomic(results_dir / "RESULTS.md", markdown + "\n")
    if readme_text is not None:
        write_text_atomic(readme, readme_text)
    return markdown


@dataclass
class ReportArguments:
    """The arguments of `benchmarks/report.py`: a results folder, or `--kg_dir` alone for only the WN18RR table."""

    results_dir: Path | None = field(
        default=None, metadata={"positional": True, "help": "quality run folder (omit: only --kg_dir table)"}
    )
    readme: Path | None = field(
        default=None, metadata={"help": "markdown file (docs/results.md) whose section is regenerated"}
    )
    readme_heading: str | None = field(
        default=None,
        metadata={
            "help": "heading of a new README section for this folder when its markers are missing (put after the "
            "last one)"
        },
    )
    kg_dir: Path | None = field(default=None, metadata={"help": "folder of `pairzoo.train_kg` runs <arm>__seed<S>"})
    peers: Path = field(default=PEERS_PATH, metadata={"help": f"peer numbers ({PEERS_LABEL}, beside the clone)"})

    def __post_init__(self) -> None:
        if self.results_dir is None and (self.kg_dir is None or self.readme is not None):
            raise ValueError("give a results_dir, or --kg_dir alone to write only <kg_dir>/RESULTS.md")


def main(argv: "list[str] | None" = None) -> None:
    """Write and print the report for `argv`; bad input is a ValueError or FileNotFoundError, raised before anything
    is written."""
    args = parse_flags(ReportArguments, argv, __doc__.split("\n")[0])
    kg_dir = args.kg_dir.resolve() if args.kg_dir else None
    if args.results_dir is None:
        table = kg_markdown(load_kg_runs(kg_dir))
        write_text_atomic(kg_dir / "RESULTS.md", table + "\n")
        print(table)
        return
    print(build_report(args.results_dir.resolve(), args.readme, kg_dir, args.peers, args.readme_heading))


__all__ = [
    "build_report",
    "comparison_markdown",
    "kg_markdown",
    "load_kg_runs",
    "load_peers",
    "readme_with_section",
    "render",
]

if __name__ == "__main__":
    sys.exit(run_command("report.py", main))
