"""The clock of every speed benchmark: wall-clock and process-CPU seconds of one call (CUDA synchronised before and
after when a GPU is present), repeats interleaved across the compared models so that load from other processes hits
them alike, and medians; the FLOP count of one call, which no load from other processes can disturb; and the share of
a model's parameters that trains."""

import math
import statistics
import time
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def clock(fn: Callable[[], object]) -> "tuple[float, float]":
    """Wall-clock and process-CPU seconds of one call of `fn`."""
    _sync()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    _sync()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved(calls: "dict[str, Callable[[], object]]", warmup: int, repeats: int) -> "dict[str, list]":
    """`warmup` untimed rounds, then `repeats` rounds that call each entry of `calls` once in turn, the order reversed
    every other round (so no entry always runs first, right after the same other one); the `(wall, cpu)` seconds of
    every timed call, per name."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times: dict[str, list] = {name: [] for name in calls}
    names = list(calls)
    for round_index in range(repeats):
        for name in names if round_index % 2 == 0 else reversed(names):
            times[name].append(clock(calls[name]))
    return times


def medians(times: "dict[str, list]") -> "tuple[dict[str, float], dict[str, float]]":
    """Median wall and median CPU seconds per name of `interleaved`'s result."""
    wall = {name: statistics.median(t[0] for t in values) for name, values in times.items()}
    cpu = {name: statistics.median(t[1] for t in values) for name, values in times.items()}
    return wall, cpu


def _lstm_flops(input_shape, second, *args, out_shape=None, **kwargs) -> int:
    """Matrix-product FLOPs of a fused LSTM: every 2-D weight (input-to-hidden and hidden-to-hidden, each layer and
    direction) multiplies one vector per token. `lstm.input` reads (input, hx, params, ...), the packed `lstm.data`
    (data, batch_sizes, hx, params, ...)."""
    params = args[1] if isinstance(second, torch.Size) else args[0]
    tokens = math.prod(input_shape[:-1])
    return sum(2 * tokens * shape[0] * shape[1] for shape in params if len(shape) == 2)


def _onednn_lstm_layer_flops(input_shape, w_ih_shape, w_hh_shape, *args, out_shape=None, **kwargs) -> int:
    """The same for one layer and direction of oneDNN's LSTM, which `lstm.input` becomes where autograd is on."""
    return 2 * math.prod(input_shape[:-1]) * (math.prod(w_ih_shape) + math.prod(w_hh_shape))


# CPU LSTMs run as fused ops that `torch.utils.flop_counter` has no formula for (GRUs decompose into counted matrix
# products); without these the LSTM-based matchers would count as nearly free. The counter looks an op up by its
# overload before running it and by its packet when counting, hence both keys.
_ONEDNN = torch.ops.aten.mkldnn_rnn_layer
_LSTM = {
    **{op: _lstm_flops for op in (torch.ops.aten.lstm, torch.ops.aten.lstm.input, torch.ops.aten.lstm.data)},
    **{op: _onednn_lstm_layer_flops for op in (_ONEDNN, _ONEDNN.default)},
}


def counted_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of `fn` as `torch.utils.flop_counter` counts them: matrix products, convolutions and
    attention, plus fused LSTMs."""
    with FlopCounterMode(display=False, custom_mapping=_LSTM) as counter:
        fn()
    return counter.get_total_flops()


def trainable_fraction(model: torch.nn.Module, of: "torch.nn.Module | None" = None) -> float:
    """Trainable parameters of `model` over all parameters of `of` (default: of `model` itself)."""
    total = sum(p.numel() for p in (of or model).parameters())
    return sum(p.numel() for p in model.parameters() if p.requires_grad) / total
