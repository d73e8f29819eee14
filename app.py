"""pairzoo web demo (Gradio; `make app`, or `python app.py [--models EXPORT_DIR ...]`), served on localhost.

Three tabs: conditional similarity (baseline and SEAVER scores with the baseline's attention next to SEAVER's
reweighting, CSR's router weights under three editable conditions), sentence pair (Comateformer's affinity,
difference and combined maps of a chosen head, class probabilities) and compare (every loaded model on one input:
prediction and latency). Without `--models` each method is built on the bundled MiniLM with an untrained head.

The page is served at once: torch, pairzoo and the models load in a background thread while a status line at the top
says how far loading got; buttons wait for it. The logic lives in `pairzoo/app_logic.py`, imported by that thread.
"""

import importlib.util
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("MPLBACKEND", "Agg")

import gradio as gr  # noqa: E402
from transformers.utils import logging  # noqa: E402

logger = logging.get_logger("pairzoo.app")
PROG = "app.py"

WAIT_SECONDS = 300  # how long a button waits for the models before it says they are still loading
EXAMPLE = {
    "sentence1": "Two women in red jackets are walking in a park.",
    "sentence2": "Two men in blue coats are walking on a beach.",
    "condition": "The number of people.",
    "condition2": "The colour of the clothing.",
    "condition3": "The activity.",
}
PAIR_EXAMPLE = {
    "sentence1": "A hardware engineer fixes the server.",
    "sentence2": "A software engineer fixes the code.",
}


class NotReady(RuntimeError):
    """The models are not loaded yet (or the demo could not start)."""


class Backend:
    """Imports pairzoo and loads the models in a background thread; until then the page shows a starting status."""

    def __init__(self, model_dirs: "list[str]", backbone: str) -> None:
        self.model_dirs = model_dirs
        self.backbone = backbone
        self.logic = None
        self.store = None
        self.error: str | None = None
        self.imported = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="pairzoo-model-loader", daemon=True).start()

    def _run(self) -> None:
        try:
            from pairzoo import app_logic

            if self.model_dirs:
                sources = app_logic.export_sources(self.model_dirs)
            else:
                sources = app_logic.bundled_sources(backbone=self.backbone)
            self.logic, self.store = app_logic, app_logic.ModelStore(sources)
        except Exception as err:  # the page must say it, not hang on "starting"
            logger.exception("the demo could not start")
            self.error = f"{type(err).__name__}: {err}"
            return
        finally:
            self.imported.set()
        self.store.load()

    def finished(self) -> bool:
        return self.error is not None or (self.store is not None and self.store.finished.is_set())

    def status_markdown(self) -> str:
        if self.error is not None:
            return f"**The demo could not start**: {self.error}"
        if self.store is None:
            return "**Starting**: importing torch, transformers and pairzoo in the background ..."
        return self.store.status_markdown()

    def ready_store(self):
        """The model store once loading has finished (waiting up to `WAIT_SECONDS`); `NotReady` otherwise."""
        if not self.imported.wait(WAIT_SECONDS) or self.error is not None:
            raise NotReady(self.error or "the demo is still starting; try again in a moment.")
        if not self.store.finished.wait(WAIT_SECONDS):
            raise NotReady("the models are still loading; try again in a moment.")
        return self.store


def _message(text: str) -> str:
    return f"**{text}**" if text else ""


def guarded(backend: Backend, empty_outputs: tuple):
    """Wrap a tab's handler `fn(store, logic, *inputs) -> outputs`: it gets the loaded store, and every failure
    becomes a message in the tab (the first output) with the other outputs cleared; tracebacks go to the log only."""

    def wrap(fn):
        def handler(*inputs):
            try:
                store = backend.ready_store()
                return ("", *fn(store, backend.logic, *inputs))
            except NotReady as err:
                return (_message(f"Not ready: {err}"), *empty_outputs)
            except backend.logic.DemoError as err:  # bad input: the message is written for the page
                return (_message(str(err)), *empty_outputs)
            except Exception as err:
                logger.exception("handler %s failed", fn.__name__)
                return (_message(f"Something went wrong: {type(err).__name__}: {str(err)[:300]}"), *empty_outputs)

        handler.__name__ = fn.__name__
        return handler

    return wrap


def build_demo(backend: Backend) -> gr.Blocks:
    """The page: a status line and the three tabs."""
    with gr.Blocks(title="pairzoo demo") as demo:
        gr.Markdown(
            "# pairzoo demo\nConditional semantic similarity and sentence matching with the pairzoo models. "
            "Each text field takes at most 200 characters."
        )
        status = gr.Markdown(backend.status_markdown(), elem_id="status")
        heads_set = gr.State(False)
        timer = gr.Timer(1.0)

        with gr.Tab("Conditional similarity", elem_id="tab-conditional"):
            with gr.Row():
                cs_s1 = gr.Textbox(EXAMPLE["sentence1"], label="Sentence 1", elem_id="cs-s1")
                cs_s2 = gr.Textbox(EXAMPLE["sentence2"], label="Sentence 2", elem_id="cs-s2")
                cs_c = gr.Textbox(EXAMPLE["condition"], label="Condition", elem_id="cs-c")
            with gr.Row():
                cs_c2 = gr.Textbox(EXAMPLE["condition2"], label="Condition 2 (CSR router weights)", elem_id="cs-c2")
                cs_c3 = gr.Textbox(EXAMPLE["condition3"], label="Condition 3 (CSR router weights)", elem_id="cs-c3")
            cs_run = gr.Button("Score", variant="primary", elem_id="cs-run")
            cs_msg = gr.Markdown(elem_id="cs-msg")
            with gr.Row():
                with gr.Column():
                    cs_base = gr.Textbox(label="Baseline (cross-encoder) score", elem_id="cs-base-score")
                    cs_base_img = gr.Image(
                        label="Baseline: last-layer attention",
                        type="pil",
                        format="png",
                        show_label=False,
                        elem_id="cs-base-img",
                    )
                with gr.Column():
                    cs_seaver = gr.Textbox(label="SEAVER score", elem_id="cs-seaver-score")
                    cs_seaver_img = gr.Image(
                        label="SEAVER: reweighting W_S",
                        type="pil",
                        format="png",
                        show_label=False,
                        elem_id="cs-seaver-img",
                    )
            with gr.Row():
                with gr.Column(scale=1):
                    cs_csr = gr.Textbox(label="CSR score (given condition)", elem_id="cs-csr-score")
                    cs_notes = gr.Markdown(elem_id="cs-notes")
                with gr.Column(scale=2):
                    cs_router_img = gr.Image(
                        label="CSR router weights per condition",
                        type="pil",
                        format="png",
                        show_label=False,
                        elem_id="cs-router-img",
                    )

        with gr.Tab("Sentence pair", elem_id="tab-pair"):
            with gr.Row():
                pair_s1 = gr.Textbox(PAIR_EXAMPLE["sentence1"], label="Sentence 1", elem_id="pair-s1")
                pair_s2 = gr.Textbox(PAIR_EXAMPLE["sentence2"], label="Sentence 2", elem_id="pair-s2")
                pair_head = gr.Dropdown([], label="Combined head", elem_id="pair-head")
            pair_run = gr.Button("Analyse", variant="primary", elem_id="pair-run")
            pair_msg = gr.Markdown(elem_id="pair-msg")
            pair_probs = gr.Label(label="Comateformer class probabilities", elem_id="pair-probs")
            pair_img = gr.Image(
                label="Affinity E, difference N, combined M",
                type="pil",
                format="png",
                show_label=False,
                elem_id="pair-img",
            )

        with gr.Tab("Compare", elem_id="tab-compare"):
            with gr.Row():
                cmp_s1 = gr.Textbox(EXAMPLE["sentence1"], label="Sentence 1", elem_id="cmp-s1")
                cmp_s2 = gr.Textbox(EXAMPLE["sentence2"], label="Sentence 2", elem_id="cmp-s2")
                cmp_c = gr.Textbox(EXAMPLE["condition"], label="Condition (conditional models only)", elem_id="cmp-c")
            cmp_run = gr.Button("Compare all loaded models", variant="primary", elem_id="cmp-run")
            cmp_msg = gr.Markdown(elem_id="cmp-msg")
            cmp_table = gr.Dataframe(
                headers=["model", "source", "inputs used", "prediction", "latency (ms)"],
                label="Every loaded model on the same input (latency: median of 3 runs after a warm-up, batch 1)",
                interactive=False,
                column_widths=["14%", "22%", "17%", "35%", "12%"],
                elem_id="cmp-table",
            )

        @guarded(backend, ("", "", "", None, None, None, ""))
        def run_conditional(store, logic, s1, s2, c, c2, c3):
            result = logic.conditional_similarity(store, s1, s2, c, [c2, c3])
            return (
                result.baseline_score or "",
                result.seaver_score or "",
                result.csr_score or "",
                result.baseline_attention,
                result.seaver_reweighting,
                result.router_weights,
                " ".join(result.notes),
            )

        @guarded(backend, (None, None))
        def run_pair(store, logic, s1, s2, head):
            result = logic.sentence_pair(store, s1, s2, head)
            prediction = result.prediction
            label = prediction.probabilities or f"regression score {prediction.score:.3f}"
            return label, result.maps

        @guarded(backend, (None,))
        def run_compare(store, logic, s1, s2, c):
            return (logic.compare(store, s1, s2, c),)

        cs_run.click(
            run_conditional,
            [cs_s1, cs_s2, cs_c, cs_c2, cs_c3],
            [cs_msg, cs_base, cs_seaver, cs_csr, cs_base_img, cs_seaver_img, cs_router_img, cs_notes],
        )
        pair_run.click(run_pair, [pair_s1, pair_s2, pair_head], [pair_msg, pair_probs, pair_img])
        cmp_run.click(run_compare, [cmp_s1, cmp_s2, cmp_c], [cmp_msg, cmp_table])

        def refresh(already_set: bool):
            """The status line; the head choices once Comateformer is loaded (once per page); the timer stops when
            loading has finished."""
            choices = backend.store.head_choices() if backend.store is not None else []
            heads = gr.update()
            if choices and not already_set:
                heads, already_set = gr.update(choices=choices, value=choices[0][1]), True
            return backend.status_markdown(), heads, already_set, gr.Timer(active=not backend.finished())

        refresh_outputs = [status, pair_head, heads_set, timer]
        timer.tick(refresh, [heads_set], refresh_outputs, show_progress="hidden")
        demo.load(refresh, [heads_set], refresh_outputs, show_progress="hidden")
    return demo


def _models_from_environment() -> "list[str]":
    return [d for d in os.environ.get("PAIRZOO_APP_MODELS", "").split(os.pathsep) if d]


@dataclass
class AppArguments:
    """Which models the demo loads and where it is served."""

    models: list[str] = field(
        default_factory=_models_from_environment,
        metadata={
            "metavar": "DIR",
            "help": "pairzoo export folders to load instead of the bundled models (or $PAIRZOO_APP_MODELS, "
            f"separated by {os.pathsep!r})",
        },
    )
    backbone: str = field(default="minilm", metadata={"help": "backbone of the bundled models"})
    host: str = field(default="127.0.0.1", metadata={"help": "address to serve on (127.0.0.1: this machine only)"})
    port: int = field(
        default_factory=lambda: int(os.environ.get("GRADIO_SERVER_PORT", 7860)),
        metadata={"help": "port to serve on (or $GRADIO_SERVER_PORT)"},
    )


def _console() -> ModuleType:
    """`pairzoo/console.py` (the parser and `run_command` of every pairzoo command line) loaded on its own: importing
    it as `pairzoo.console` would import the pairzoo package, and with it torch, before the page is served."""
    name = "pairzoo_console_for_app"
    if name not in sys.modules:
        package = importlib.util.find_spec("pairzoo")
        spec = importlib.util.spec_from_file_location(name, Path(package.origin).with_name("console.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def parse_args(argv: "list[str]") -> AppArguments:
    """The flags of `argv`; a `--models` entry that is not a folder or a `--port` out of range is a ValueError naming
    the flag."""
    parser = _console().OneLineErrorParser(AppArguments, prog=PROG, description=__doc__.split("\n\n")[0])
    (args,) = parser.parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    missing = [d for d in args.models if not Path(d).is_dir()]
    if missing:
        raise ValueError(f"--models: not a folder: {', '.join(missing)}")
    if not 0 < args.port < 65536:
        raise ValueError(f"--port: {args.port} is not a port number (1 to 65535)")
    return args


def run(argv: "list[str]") -> None:
    """Serve the demo until it is stopped."""
    args = parse_args(argv)
    backend = Backend(args.models, args.backbone)
    demo = build_demo(backend)
    demo.queue(default_concurrency_limit=1)
    demo.launch(server_name=args.host, server_port=args.port, prevent_thread_lock=True, footer_links=[])
    backend.start()  # after the server is up, so the import does not compete with serving the first page
    demo.block_thread()


def main(argv: "list[str] | None" = None) -> int:
    """`run` as a command line on `argv` (default `sys.argv[1:]`): returns the exit status (an error in the input
    is one line and 2; the models' messages are shown on stderr while it runs)."""
    return _console().run_command(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
