"""The shared palette: colour-blind-safe colours, a hatch or marker that tells the compared kinds apart, alt text."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from graphcourse.lessons import palette  # noqa: E402
from graphcourse.lessons.palette import COLORS, HATCHES, MARKERS, OKABE_ITO, alt_text  # noqa: E402


def _rgb(hex_colour):
    return tuple(int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))


def _deuteranope(rgb):
    """Machado et al. (2009) deuteranopia matrix at full severity, on linear-ish RGB: enough to compare distances."""
    r, g, b = rgb
    return (0.367 * r + 0.861 * g - 0.228 * b, 0.280 * r + 0.673 * g + 0.047 * b, -0.012 * r + 0.043 * g + 0.969 * b)


COMPARED = ("eager", "graph", "sync", "padding")


def test_every_colour_comes_from_the_okabe_ito_palette():
    assert set(COLORS.values()) <= set(OKABE_ITO.values())


def test_the_compared_kinds_have_distinct_colours_hatches_and_markers():
    for table in (COLORS, HATCHES, MARKERS):
        values = [table[palette.ALIASES.get(k, k)] for k in COMPARED]
        assert len(set(values)) == len(values), table


def test_the_compared_kinds_stay_apart_for_a_deuteranope():
    seen = [_deuteranope(_rgb(palette.color(k))) for k in COMPARED]
    for i, a in enumerate(seen):
        for b in seen[i + 1:]:
            assert sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5 > 0.15


def test_no_red_against_green_for_eager_and_graph():
    eager, graph = _rgb(palette.color("eager")), _rgb(palette.color("graph"))
    assert not (eager[0] > 0.6 and eager[1] < 0.4 and graph[1] > 0.5 and graph[0] < 0.4)


def test_unknown_kind_names_the_known_ones():
    with pytest.raises(KeyError, match="pick one of .*padding"):
        palette.color("purple")


def test_alt_text_names_titles_axes_and_legend():
    fig, ax = plt.subplots()
    ax.plot([1, 2], label="eager, measured")
    ax.set(title="A chain of N tiny kernels", xlabel="kernels", ylabel="µs per kernel")
    ax.legend()
    fig.suptitle("on an H200")
    text = alt_text(fig)
    for part in ("on an H200", "A chain of N tiny kernels", "µs per kernel against kernels", "eager, measured"):
        assert part in text
    plt.close(fig)


def test_alt_text_of_a_bare_figure_is_still_text():
    fig = plt.figure()
    assert alt_text(fig) == "A figure without titles or labels"
    plt.close(fig)


def test_install_alt_text_outside_ipython_does_nothing():
    assert palette.install_alt_text() is False


def test_figures_shown_in_a_notebook_carry_their_alt_text():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import graphcourse.lessons.plots\nimport matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.bar(['useful', 'padding'], [3, 1])\nax.set_title('padding: 25% of rows')")]
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600).execute()
    images = [o for o in nb.cells[0].outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
    assert images[0]["metadata"]["image/png"]["alt"] == "padding: 25% of rows"
