"""Slider explorers for the lessons: the launch tax (lesson 02) and buckets and padding (lesson 04).

Each explorer is a pure function that turns slider values into numbers, a text and a
figure (``launch_tax``/``render_launch_tax``, ``bucket_choice``/``render_buckets``), and a
widget that calls it whenever a control moves (``launch_tax_explorer()``,
``bucket_explorer()``). The pure functions are what the tests check; the widgets only wire
controls to them. The numbers come from toygraph: ``step_time_us`` for the timeline,
``bucket_for``/``waste_fraction``/``padding_report`` and ``BucketedGraphs`` for buckets.

Contract with the browser test: the batch-size slider of each explorer carries the CSS
class ``batch-size-slider``; the explorer's ``Output`` widget holds a text (stdout) and a
PNG of the figure, both replaced whenever a control moves.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from toygraph import (H200_COSTS, BucketedGraphs, ToyDevice, ToyGraphError, bucket_for, check_buckets, every_n,
                      padding_report, powers_of_two, simulate, step_time_us, waste_fraction)

from ..errors import GraphCourseError
from .palette import COLORS, HATCHES, MARKERS
from .plots import compare_timelines
from .teaching import cuda_here

__all__ = [
    "BATCH_SLIDER_CLASS", "SATURATION_BATCH", "MEASURED_MAX_BATCH", "fit_saturation_batch", "saturation_curve", "POLICIES", "BucketChoice", "BucketTextError", "Explorer", "LaunchTax",
    "bucket_choice", "bucket_explorer", "bucket_figure", "buckets_for_policy", "kernel_us_at_batch", "launch_tax",
    "launch_tax_explorer", "launch_tax_figure", "parse_buckets", "render_buckets", "render_launch_tax",
    "TOY_STEP", "GpuFigures", "cuda_here", "figure_png", "live_or_recorded",
]

BATCH_SLIDER_CLASS = "batch-size-slider"
"""CSS class of every batch-size slider (the browser test finds the slider by it)."""

def per_kernel_ratios(decode_rows: list[dict[str, Any]]) -> dict[int, float]:
    """Mean GPU time per kernel at each recorded batch, over that at batch 1 (the benchmark's ``decode`` rows)."""
    per_kernel = {r["batch"]: r["kernel_time_us"] / r["kernels"] for r in decode_rows if r.get("kernels")}
    if 1 not in per_kernel or len(per_kernel) < 2:
        raise ValueError("fitting needs the batch-1 row and at least one larger batch from the decode benchmark.")
    return {b: t / per_kernel[1] for b, t in sorted(per_kernel.items())}


def saturation_curve(batch_size: float, saturation_batch: float) -> float:
    """Kernel time at this batch over its batch-1 time: sqrt(1 + (b / B)^2), flat for b << B, proportional for b >> B."""
    return math.hypot(1.0, batch_size / saturation_batch)


def fit_saturation_batch(decode_rows: list[dict[str, Any]]) -> float:
    """The batch B at which decode kernels saturate the GPU, least-squares fitted to the recorded per-kernel times.

    Decode kernels are memory-bound: each reads its weights whatever the batch, so extra rows cost
    little until the GPU's bandwidth or cores are busy; beyond that, time grows with the rows.
    ``saturation_curve`` models exactly that with one number, B.
    """
    ratios = per_kernel_ratios(decode_rows)
    if all(r <= 1.0 for b, r in ratios.items() if b > 1):
        raise ValueError("the recorded kernel times do not grow with the batch: nothing to fit.")
    grid = [10 ** (k / 200) for k in range(0, 1001)]  # B from 1 to 100,000 rows
    return min(grid, key=lambda B: sum((saturation_curve(b, B) - r) ** 2 for b, r in ratios.items()))


def _recorded_saturation(default: float = 50.0) -> tuple[float, int, str]:
    try:
        from .reference import load_reference, recorded_label

        data = load_reference()
        rows = data["decode"]["rows"]
        return (fit_saturation_batch(rows), max(r["batch"] for r in rows),
                f"fitted to the decode step's mean kernel time per batch, {recorded_label(data)}")
    except Exception as exc:  # a course copy without recorded data still runs the slider
        return default, 0, f"a default ({type(exc).__name__}: no recorded decode rows to fit)"


SATURATION_BATCH, MEASURED_MAX_BATCH, SATURATION_SOURCE = _recorded_saturation()
"""The fitted saturation batch, the largest batch the benchmark measured, and where the fit comes from."""


class BucketTextError(GraphCourseError, ValueError):
    """The custom bucket list typed into the explorer cannot be read as batch sizes."""


# --------------------------------------------------------------------------- the launch tax (lesson 02)


def kernel_us_at_batch(kernel_us: float, batch_size: int, saturation_batch: float | None = None) -> float:
    """GPU time of one kernel at this batch: nearly flat until the GPU saturates, ``kernel_us * sqrt(1 + (b / B)^2)``.

    `saturation_batch` B defaults to SATURATION_BATCH, fitted to the course's recorded decode kernel
    times (batches 1 to MEASURED_MAX_BATCH; beyond them the curve is an extrapolation).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}.")
    return kernel_us * saturation_curve(batch_size, SATURATION_BATCH if saturation_batch is None else saturation_batch)


@dataclass(frozen=True)
class LaunchTax:
    """One decode step of `n_kernels` kernels, eager against graph, on the toy's timeline."""

    n_kernels: int
    kernel_us: float
    launch_us: float
    batch_size: int
    kernel_us_at_batch: float
    eager_step_us: float
    graph_step_us: float

    @property
    def gpu_work_us(self) -> float:
        """Summed GPU time of the step's kernels: the floor no launch strategy beats."""
        return self.n_kernels * self.kernel_us_at_batch

    @property
    def launch_bound(self) -> bool:
        """True when eager launching, not the GPU, sets the eager step time (a launch costs more than a kernel)."""
        return self.launch_us > self.kernel_us_at_batch

    @property
    def speedup(self) -> float:
        """Eager step time over graph step time."""
        return self.eager_step_us / self.graph_step_us

    def __repr__(self) -> str:
        return (f"LaunchTax({self.n_kernels} kernels of {self.kernel_us_at_batch:.2f} µs at batch {self.batch_size}, "
                f"launch {self.launch_us:.2f} µs: eager {self.eager_step_us:.1f} µs, graph {self.graph_step_us:.1f} µs, "
                f"{self.speedup:.2f}x)")

    @property
    def text(self) -> str:
        """A few lines a learner reads beside the plot."""
        limiter = ("the CPU's launches: the GPU waits between kernels" if self.launch_bound
                   else "the GPU's kernels: launches hide behind them")
        beyond = (f" (beyond the measured batches 1-{MEASURED_MAX_BATCH}: an extrapolation)"
                   if MEASURED_MAX_BATCH and self.batch_size > MEASURED_MAX_BATCH else "")
        return (
            f"{self.n_kernels} kernels of {self.kernel_us_at_batch:,.2f} µs at batch {self.batch_size}{beyond}, "
            f"launch {self.launch_us:,.2f} µs each\n"
            f"eager: {self.eager_step_us:,.1f} µs per step (limited by {limiter})\n"
            f"graph: {self.graph_step_us:,.1f} µs per step (GPU work alone: {self.gpu_work_us:,.1f} µs)\n"
            f"speedup: {self.speedup:.2f}x"
        )


def launch_tax(n_kernels: int = 40, kernel_us: float = H200_COSTS.kernel_us, launch_us: float = H200_COSTS.launch_us,
               batch_size: int = 1) -> LaunchTax:
    """Steady-state eager and graph step times for these slider values (toygraph.step_time_us)."""
    at_batch = kernel_us_at_batch(kernel_us, batch_size)
    cost = H200_COSTS.with_(launch_us=launch_us, kernel_us=at_batch)
    return LaunchTax(n_kernels, kernel_us, launch_us, batch_size, at_batch,
                     step_time_us(n_kernels, mode="eager", cost=cost),
                     step_time_us(n_kernels, mode="graph", cost=cost))


def launch_tax_figure(lt: LaunchTax, steps: int = 2) -> Figure:
    """The eager and graph timelines of `steps` steps, CPU and GPU lanes, on one time axis."""
    cost = H200_COSTS.with_(launch_us=lt.launch_us, kernel_us=lt.kernel_us_at_batch)
    return compare_timelines({
        f"eager ({lt.eager_step_us:,.1f} µs/step)": simulate(lt.n_kernels, mode="eager", steps=steps, cost=cost),
        f"graph ({lt.graph_step_us:,.1f} µs/step)": simulate(lt.n_kernels, mode="graph", steps=steps, cost=cost),
    }, title=f"{steps} decode steps of {lt.n_kernels} kernels, batch {lt.batch_size}")


def render_launch_tax(n_kernels: int = 40, kernel_us: float = H200_COSTS.kernel_us,
                      launch_us: float = H200_COSTS.launch_us, batch_size: int = 1) -> tuple[str, Figure]:
    """The explorer's text and figure for these slider values."""
    lt = launch_tax(n_kernels, kernel_us, launch_us, batch_size)
    return lt.text, launch_tax_figure(lt)


# --------------------------------------------------------------------------- buckets and padding (lesson 04)

POLICIES = ("powers of two", "every 8 (vLLM)", "custom list")
"""Bucket policies of the bucket explorer's dropdown."""

TOY_STEP = (lambda x: [v * 2 for v in x], lambda x: [v + 1 for v in x], lambda x: [max(v, 0) for v in x])
"""The toy decode step whose graphs the bucket explorer captures, one per bucket, to weigh their memory."""


def parse_buckets(text: str) -> tuple[int, ...]:
    """Bucket sizes from text such as "1, 2, 4, 8" (commas or spaces), sorted; BucketTextError says what is wrong."""
    parts = [p for p in str(text).replace(",", " ").split()]
    if not parts:
        raise BucketTextError("The custom bucket list is empty: type batch sizes separated by commas, e.g. 1, 2, 4, 8.")
    bad = [p for p in parts if not p.lstrip("+-").isdigit()]
    if bad:
        raise BucketTextError(
            f"Could not read the custom bucket list {text.strip()!r}: {', '.join(map(repr, bad))} "
            f"{'is not a whole number' if len(bad) == 1 else 'are not whole numbers'}. "
            f"Type batch sizes separated by commas, e.g. 1, 2, 4, 8.")
    try:
        return check_buckets(int(p) for p in parts)
    except ToyGraphError as exc:
        raise BucketTextError(f"Could not use the custom bucket list {text.strip()!r}: {exc}") from None


def buckets_for_policy(policy: str, max_batch: int, custom: str = "") -> tuple[int, ...]:
    """The bucket sizes a policy captures for batches up to max_batch ("custom list" reads `custom`)."""
    if policy == "powers of two":
        return powers_of_two(max_batch)
    if policy == "every 8 (vLLM)":
        return every_n(8, max_batch)
    if policy == "custom list":
        return parse_buckets(custom)
    raise BucketTextError(f"unknown bucket policy {policy!r}: pick one of {', '.join(POLICIES)}.")


@dataclass(frozen=True)
class BucketChoice:
    """Where one batch lands under a bucket list, and what the list costs over batches 1..max_batch."""

    batch_size: int
    buckets: tuple[int, ...]
    max_batch: int
    bucket: int | None
    memory_bytes: dict[int, int] = field(repr=False)

    @property
    def padding_rows(self) -> int:
        """Rows of padding this batch gets (0 when it runs eagerly)."""
        return 0 if self.bucket is None else self.bucket - self.batch_size

    @property
    def waste_fraction(self) -> float:
        """Share of the replayed bucket that is padding (0.0 when the batch runs eagerly)."""
        return 0.0 if self.bucket is None else waste_fraction(self.batch_size, self.bucket)

    @property
    def waste_by_batch(self) -> list[float]:
        """Waste fraction of each batch size 1..max_batch (NaN where it runs eagerly)."""
        out = []
        for n in range(1, self.max_batch + 1):
            b = bucket_for(n, self.buckets)
            out.append(math.nan if b is None else waste_fraction(n, b))
        return out

    @property
    def overall(self):  # -> toygraph.PaddingReport
        """Padding report of a stream that holds every batch size 1..max_batch once."""
        return padding_report(range(1, self.max_batch + 1), self.buckets)

    @property
    def text(self) -> str:
        """A few lines a learner reads beside the plots."""
        sizes = ", ".join(map(str, self.buckets))
        if self.bucket is None:
            where = (f"batch {self.batch_size} -> above the largest bucket ({self.buckets[-1]}): it runs eagerly, "
                     f"paying every launch (EagerFallbackWarning)")
        else:
            where = (f"batch {self.batch_size} -> bucket {self.bucket}: {self.padding_rows} padding rows, "
                     f"{100 * self.waste_fraction:.1f}% of the replayed rows are padding")
        report = self.overall
        total = sum(self.memory_bytes.values())
        mine = f" (bucket {self.bucket}: {self.memory_bytes[self.bucket]:,} bytes)" if self.bucket is not None else ""
        return (
            f"buckets: {sizes} ({len(self.buckets)} graphs)\n{where}\n"
            f"every batch size 1..{self.max_batch} once: {100 * report.waste_fraction:.1f}% of graphed rows are padding, "
            f"{report.eager_batches} of {self.max_batch} sizes run eagerly\n"
            f"toy graph memory: {total:,} bytes over {len(self.buckets)} graphs{mine}"
        )


def _toy_memory_bytes(buckets: tuple[int, ...]) -> dict[int, int]:
    graphs = BucketedGraphs(list(TOY_STEP), buckets, device=ToyDevice(capacity_bytes=2**40))
    return graphs.memory_bytes


def bucket_choice(batch_size: int = 17, policy: str = "powers of two", custom: str = "1, 2, 4, 8, 16, 32, 64",
                  max_batch: int = 64) -> BucketChoice:
    """The bucket a batch lands in under a policy, with the toy graph memory of each bucket."""
    buckets = buckets_for_policy(policy, max_batch, custom)
    return BucketChoice(batch_size, buckets, max_batch, bucket_for(batch_size, buckets), _toy_memory_bytes(buckets))


def bucket_figure(choice: BucketChoice) -> Figure:
    """Left: padding waste of every batch size 1..max_batch, this batch marked. Right: toy graph memory per bucket."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2), gridspec_kw={"width_ratios": [3, 2]})
    sizes = range(1, choice.max_batch + 1)
    left.step(sizes, [100 * w for w in choice.waste_by_batch], where="mid", color=COLORS["padding"])
    left.axhline(100 * choice.overall.waste_fraction, color=COLORS["host"], linestyle=":",
                 label=f"all sizes: {100 * choice.overall.waste_fraction:.1f}%")
    marker_y = 100 * choice.waste_fraction
    left.plot([choice.batch_size], [marker_y], MARKERS["highlight"], color=COLORS["highlight"], markersize=12,
              label=f"batch {choice.batch_size}: " + ("eager" if choice.bucket is None else f"{marker_y:.1f}%"))
    left.set(xlabel="batch size", ylabel="padding (% of replayed rows)", ylim=(-2, 100), xlim=(0.5, choice.max_batch + 0.5),
             title="padding waste per batch size")
    left.legend(fontsize=8, loc="upper right")
    labels = [str(b) for b in choice.buckets]
    chosen = [b == choice.bucket for b in choice.buckets]
    right.bar(labels, [choice.memory_bytes[b] for b in choice.buckets], edgecolor="white",
              color=[COLORS["highlight"] if c else COLORS["graph_launch"] for c in chosen],
              hatch=["xx" if c else HATCHES["graph_launch"] for c in chosen])
    right.set(xlabel="bucket (graph captured for this batch)", ylabel="bytes (toy)", title="toy graph memory per bucket")
    right.tick_params(axis="x", labelsize=7, rotation=90 if len(labels) > 10 else 0)
    fig.tight_layout()
    return fig


def render_buckets(batch_size: int = 17, policy: str = "powers of two", custom: str = "1, 2, 4, 8, 16, 32, 64",
                   max_batch: int = 64) -> tuple[str, Figure | None]:
    """The explorer's text and figure; for an unreadable custom list, the message and no figure."""
    try:
        choice = bucket_choice(batch_size, policy, custom, max_batch)
    except BucketTextError as exc:
        return str(exc), None
    return choice.text, bucket_figure(choice)


# --------------------------------------------------------------------------- the widgets


def figure_png(fig: Figure, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (and the figure closed, so it is not drawn a second time by the notebook)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return buffer.getvalue()


class Explorer(widgets.VBox):
    """Controls above an Output widget; every change of a control re-runs `render` and replaces the output.

    ``explorer.controls`` names the controls, ``explorer.text`` is the last text shown and
    ``explorer.output.outputs`` the last outputs (a stdout text and a PNG). Works without a front
    end: setting ``explorer.controls["batch_size"].value`` re-renders at once.
    """

    def __init__(self, controls: dict[str, widgets.Widget], render: Callable[..., tuple[str, Figure | None]],
                 fixed: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.controls = controls
        self.render = render
        self.fixed = dict(fixed or {})
        self.output = widgets.Output(layout=widgets.Layout(min_height="260px"))
        self.output.add_class("explorer-output")
        self.text = ""
        self.renders = 0
        super().__init__(children=[widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap")),
                                   self.output], **kwargs)
        for control in controls.values():
            control.observe(self.refresh, names="value")
        self.refresh()

    @property
    def values(self) -> dict[str, Any]:
        """The current value of every control, by name."""
        return {name: c.value for name, c in self.controls.items()}

    def refresh(self, change: object = None) -> None:
        """Render the current values and replace the output (text, then the figure as a PNG)."""
        text, fig = self.render(**self.values, **self.fixed)
        outputs: list[dict] = [{"output_type": "stream", "name": "stdout", "text": text + "\n"}]
        if fig is not None:
            png = base64.b64encode(figure_png(fig)).decode("ascii")
            outputs.append({"output_type": "display_data", "metadata": {},
                            "data": {"image/png": png, "text/plain": "<Figure>"}})
        self.text = text
        self.renders += 1
        self.output.outputs = tuple(outputs)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.values.items())
        return f"{type(self).__name__}({args})"


def _batch_slider(value: int, max_value: int) -> widgets.IntSlider:
    slider = widgets.IntSlider(value=value, min=1, max=max_value, description="batch size",
                               continuous_update=False, style={"description_width": "initial"})
    slider.add_class(BATCH_SLIDER_CLASS)
    return slider


def launch_tax_explorer(n_kernels: int = 40, kernel_us: float = H200_COSTS.kernel_us,
                        launch_us: float = H200_COSTS.launch_us, batch_size: int = 1) -> Explorer:
    """Sliders for kernels per step, kernel time, launch cost and batch size over the eager-vs-graph timeline."""
    style = {"description_width": "initial"}
    controls = {
        "n_kernels": widgets.IntSlider(value=n_kernels, min=1, max=100, description="kernels per step",
                                       continuous_update=False, style=style),
        "kernel_us": widgets.FloatSlider(value=kernel_us, min=0.5, max=20.0, step=0.01, description="kernel µs (floor)",
                                         continuous_update=False, style=style),
        "launch_us": widgets.FloatSlider(value=launch_us, min=0.0, max=30.0, step=0.5, description="launch µs",
                                         continuous_update=False, style=style),
        "batch_size": _batch_slider(batch_size, 1024),
    }
    return Explorer(controls, render_launch_tax)


def bucket_explorer(batch_size: int = 17, policy: str = "powers of two", custom: str = "1, 2, 4, 8, 16, 32, 64",
                    max_batch: int = 64) -> Explorer:
    """A batch-size slider, a bucket-policy dropdown and a custom list over padding waste and toy graph memory."""
    controls = {
        "batch_size": _batch_slider(batch_size, max_batch),
        "policy": widgets.Dropdown(options=POLICIES, value=policy, description="buckets"),
        "custom": widgets.Text(value=custom, description="custom list", continuous_update=False,
                               placeholder="e.g. 1, 2, 4, 8, 16, 32, 64"),
    }
    return Explorer(controls, render_buckets, fixed={"max_batch": max_batch})


# --------------------------------------------------------------------------- GPU cells: live, or recorded


@dataclass(frozen=True)
class GpuFigures:
    """One section of GPU figures, where they came from, and whether they were measured here and now."""

    data: Any
    label: str
    live: bool

    @property
    def available(self) -> bool:
        """False when there is neither a GPU here nor a recorded file to show."""
        return self.data is not None


NO_RECORDED_RESULTS = ("The recorded GPU results (data/gpu_reference.json) are not in this copy of the course yet: "
                       "run `python -m graphcourse.gpulib.bench` on a CUDA machine to write them, then run this cell again.")


def live_or_recorded(section: str, measure: Callable[[], Any]) -> GpuFigures:
    """Run `measure()` when a CUDA GPU is here, else read `section` of the recorded results; prints one line saying which."""
    import datetime

    from ..errors import ReferenceDataError, ReferenceDataMissingError
    from .reference import load_reference, recorded_label
    from .reference import section as reference_section

    if cuda_here():
        import torch

        name = torch.cuda.get_device_name(0)
        print(f"A CUDA GPU is here ({name}): measuring live.")
        return GpuFigures(measure(), f"measured live on {name}, {datetime.date.today():%Y-%m-%d}", True)
    print("No CUDA GPU here: this cell shows results recorded on a GPU by the course's benchmark.")
    try:
        data = load_reference()
        return GpuFigures(reference_section(section, data), recorded_label(data), False)
    except ReferenceDataMissingError:
        print(NO_RECORDED_RESULTS)
    except ReferenceDataError as exc:
        print(f"The recorded GPU results cannot be shown: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    return GpuFigures(None, "", False)
