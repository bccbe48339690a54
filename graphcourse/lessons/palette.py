"""Colours, hatches and markers every course plot shares, chosen so a colour-blind reader tells them apart.

The colours are the Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2002), made to
stay distinct under the common forms of colour blindness, picked so the names the lessons use
still hold (eager launches blue, graph launches green, waiting yellow, the sync red, kernels
orange); on top of that each kind that a
lesson compares (eager, graph, sync, padding) has its own hatch and marker, so the plots
read in greyscale too. :func:`alt_text` writes a short text alternative for a figure from
its titles, axis labels and legend, for readers who cannot see it (the published site puts
it in the image's ``alt``), and :func:`install_alt_text` makes every figure a notebook shows
carry that text in its output metadata.
"""

from __future__ import annotations

from typing import Any

OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "grey": "#999999",  # not one of the eight; for background work that needs no attention
}

COLORS = {
    "launch": OKABE_ITO["blue"],            # eager: one kernel launch at a time, the launch tax
    "graph_launch": OKABE_ITO["bluish_green"],  # graph: one launch replays the step
    "host": OKABE_ITO["grey"],              # Python and other CPU work
    "wait": OKABE_ITO["yellow"],            # the CPU waiting on a sync
    "sync": OKABE_ITO["vermillion"],        # the sync itself (.item())
    "kernel": OKABE_ITO["orange"],          # kernels on the GPU
    "padding": OKABE_ITO["reddish_purple"], # padded rows a bucket replays for nothing
    "useful": OKABE_ITO["sky_blue"],        # rows that carry real work
    "highlight": OKABE_ITO["black"],        # the one point a plot asks the reader to look at
}
"""Colour of each kind of bar or line, by the name the timeline and the plots use."""

HATCHES = {
    "launch": "//", "graph_launch": "", "host": "", "wait": "..", "sync": "xx", "kernel": "",
    "padding": "\\\\", "useful": "", "highlight": "",
}
"""Hatch of each kind: eager, sync and padding stand out by pattern as well as colour."""

MARKERS = {
    "launch": "s", "graph_launch": "o", "host": ".", "wait": "v", "sync": "X", "kernel": "D",
    "padding": "^", "useful": "o", "highlight": "*",
}
"""Marker of each kind for line and scatter plots."""

ALIASES = {"eager": "launch", "graph": "graph_launch", "item": "sync"}
"""Names a lesson may say instead: eager is 'launch', graph is 'graph_launch'."""


def _kind(kind: str) -> str:
    name = ALIASES.get(kind, kind)
    if name not in COLORS:
        known = ", ".join(sorted({*COLORS, *ALIASES}))
        raise KeyError(f"no palette entry for {kind!r}: pick one of {known}.")
    return name


def color(kind: str) -> str:
    """The colour of a kind ('eager', 'graph', 'sync', 'padding', 'kernel', ...)."""
    return COLORS[_kind(kind)]


def hatch(kind: str) -> str:
    """The hatch pattern of a kind ('' for a solid fill)."""
    return HATCHES[_kind(kind)]


def marker(kind: str) -> str:
    """The line-plot marker of a kind."""
    return MARKERS[_kind(kind)]


def style(kind: str) -> dict[str, str]:
    """Keyword arguments for a bar of this kind: ``ax.bar(x, y, **style('padding'))``."""
    return {"color": color(kind), "hatch": hatch(kind), "edgecolor": "white"}


def alt_text(fig: Any, limit: int = 600) -> str:
    """A short text alternative for a matplotlib figure: its title, each panel's title and axes, and the legend."""
    parts: list[str] = []
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text().strip():
        parts.append(suptitle.get_text().strip())
    for ax in fig.get_axes():
        title = " ".join(t for t in (ax.get_title(loc=where).strip() for where in ("left", "center", "right")) if t)
        xlabel, ylabel = ax.get_xlabel().strip(), ax.get_ylabel().strip()
        panel = title or "a panel"
        if xlabel or ylabel:
            panel += f" ({ylabel or 'value'} against {xlabel or 'position'})"
        legend = ax.get_legend()
        names = [t.get_text() for t in legend.get_texts()] if legend is not None else []
        if names:
            panel += "; shows " + ", ".join(names)
        parts.append(panel)
    for legend in getattr(fig, "legends", []):
        names = [t.get_text() for t in legend.get_texts()]
        if names:
            parts.append("legend: " + ", ".join(names))
    text = ". ".join(p.rstrip(".") for p in parts if p) or "A figure without titles or labels"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _png_with_alt(fig: Any) -> tuple[bytes, dict[str, str]]:
    from IPython.core.pylabtools import print_figure

    return print_figure(fig, "png", bbox_inches="tight"), {"alt": alt_text(fig)}


def _with_alt(formatter: Any) -> Any:
    """Wrap a PNG formatter of figures (the inline backend's, with its settings) so it adds the alt text."""
    def png(fig: Any) -> Any:
        data = formatter(fig)
        if data is None:
            return None
        metadata: dict[str, Any] = {}
        if isinstance(data, tuple) and len(data) == 2:
            data, metadata = data[0], dict(data[1] or {})
        return data, {**metadata, "alt": alt_text(fig)}

    png.graphcourse_alt = True  # type: ignore[attr-defined]
    return png


def install_alt_text(shell: Any = None) -> bool:
    """Make each figure a notebook displays carry its alt text in the PNG output's metadata (``{"alt": ...}``).

    The inline backend's own PNG formatter (with its format and resolution settings) is wrapped, and
    wrapped again before and after every cell, because the backend installs a fresh one when it starts.
    Returns False outside IPython (nothing to do there).
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    from matplotlib.figure import Figure

    def register(*_: Any) -> None:
        formatters = shell.display_formatter.formatters["image/png"]
        try:
            current = formatters.lookup_by_type(Figure)
        except KeyError:
            current = None
        if getattr(current, "graphcourse_alt", False):
            return
        formatters.for_type(Figure, _with_alt(current) if current is not None else _png_with_alt)

    register()
    if not getattr(shell, "_graphcourse_alt_text", False):
        shell.events.register("pre_run_cell", register)
        shell.events.register("post_execute", register)
        shell._graphcourse_alt_text = True
    return True
