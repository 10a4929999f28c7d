"""The figures of `gaussopt compare` / `gaussopt run --plot`, inspected as Figure objects.

One short four-bar comparison (0.7 s: through the first singular position at
t ~ 0.58 s; the GA over 0.02 s) feeds every figure: units on every axis, one
colour per solver across all figures, no values at a clipping floor on log
axes, one legend per figure, readable titles with the solver and settings,
the frames at one scale, and the agreement of closed_form/lagrange/qp stated.
"""

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gaussopt import plotting  # noqa: E402
from gaussopt.compare import compare  # noqa: E402
from gaussopt.problem import ga_settings  # noqa: E402
from problems import four_bar  # noqa: E402

UNIT = re.compile(r"\[[^\]?]+\]")   # "[rad]", "[m/s, rad/s]"; not "[?]"
SOLVERS = ("closed_form", "lagrange", "lagrange_baumgarte", "qp", "ga")


@pytest.fixture(scope="module")
def runs():
    pb = four_bar.build(t_end=0.7)
    pb.solver_settings["ga"] = ga_settings(0.7, horizon=0.02)
    comp = compare(pb, SOLVERS)
    assert all(tr.success for tr in comp.trajectories.values())
    return pb, comp.trajectories


@pytest.fixture(scope="module")
def figures(runs):
    pb, trajs = runs
    figs = {"summary": plotting.summary_figure(pb, trajs),
            "run": plotting.summary_figure(pb, {"qp": trajs["qp"]})}
    figs.update(plotting.make_comparison_figures(pb, trajs))
    yield figs
    for f in figs.values():
        plt.close(f)


def data_axes(fig):
    """Axes that show data (lines), not the legend panel."""
    return [ax for ax in fig.axes if ax.axison and ax.lines]


def solver_lines(fig):
    return [ln for ax in fig.axes for ln in ax.lines
            if (ln.get_gid() or "").startswith("solver:")]


def test_the_expected_figures(figures):
    assert set(figures) == {"summary", "run", "four_bar_y1_ga_vs_lagrange",
                            "four_bar_multipliers", "four_bar_frames"}


def test_every_axis_with_data_has_labels_with_units(figures):
    for name, fig in figures.items():
        axs = data_axes(fig)
        assert axs, name
        for ax in axs:
            # a shared axis may carry the label on its sibling (bottom row, left column)
            xl = [a.get_xlabel() for a in ax.get_shared_x_axes().get_siblings(ax)]
            yl = [a.get_ylabel() for a in ax.get_shared_y_axes().get_siblings(ax)]
            assert any(UNIT.search(s) for s in xl), (name, xl)
            assert any(UNIT.search(s) for s in yl), (name, yl)
            assert "?" not in ax.get_xlabel() + ax.get_ylabel(), (name, ax.get_ylabel())


def test_units_follow_from_the_problem(figures):
    labels = {ax.get_ylabel() for f in figures.values() for ax in f.axes}
    # th1 in rad, y1 in m; residuals of Phi = (l sin th1 - l sin th2 [m], th1 + th3 - pi [rad]);
    # multipliers energy / row unit; M a - F energy / coordinate unit (all rad)
    for want in ("th1 [rad]", "y1 [m]", "[m, rad]", "[m/s, rad/s]", "[J]", "[N, N m]",
                 "y [m]"):
        assert any(want in s for s in labels), (want, labels)
    mult = figures["four_bar_multipliers"].axes
    assert "lambda" in mult[0].get_ylabel() and mult[0].get_ylabel().endswith("[N, N m]")
    assert "M a - F" in mult[1].get_ylabel() and mult[1].get_ylabel().endswith("[N m]")


def test_time_label_only_on_the_bottom_axis_of_a_column(figures):
    for name in ("summary", "four_bar_multipliers", "four_bar_y1_ga_vs_lagrange"):
        fig = figures[name]
        with_t = [ax for ax in data_axes(fig) if ax.get_xlabel() == "t [s]"]
        columns = {round(ax.get_position().x0, 2) for ax in data_axes(fig)}
        assert len(with_t) == len(columns), (name, len(with_t), columns)
        for ax in with_t:      # nothing below it in its column
            below = [a for a in data_axes(fig) if a is not ax
                     and abs(a.get_position().x0 - ax.get_position().x0) < 0.01
                     and a.get_position().y0 < ax.get_position().y0]
            assert not below, name


def test_one_colour_per_solver_across_all_figures(figures):
    colours = {}
    for name, fig in figures.items():
        for ln in solver_lines(fig):
            solver = ln.get_gid().split(":", 1)[1]
            c = matplotlib.colors.to_hex(ln.get_color())
            colours.setdefault(solver, set()).add(c)
    assert set(colours) == set(SOLVERS)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({next(iter(c)) for c in colours.values()}) == len(SOLVERS)
    # the legend swatches carry the same colours
    leg = [ax.get_legend() for ax in figures["summary"].axes if ax.get_legend()][0]
    for text, handle in zip(leg.get_texts(), leg.legend_handles):
        solver = text.get_text().split(" ")[0]
        if solver in colours:
            assert matplotlib.colors.to_hex(handle.get_color()) in colours[solver]


def test_unknown_solvers_get_the_next_colour_of_a_fixed_cycle():
    a = plotting.solver_color("test_figures_solver_a")
    b = plotting.solver_color("test_figures_solver_b")
    assert a in plotting.EXTRA_COLORS and b in plotting.EXTRA_COLORS and a != b
    assert (plotting.EXTRA_COLORS.index(b) - plotting.EXTRA_COLORS.index(a)) \
        % len(plotting.EXTRA_COLORS) == 1
    assert plotting.solver_color("test_figures_solver_a") == a
    assert plotting.solver_color("closed form") == plotting.SOLVER_COLORS["closed_form"]
    assert a not in {plotting.SOLVER_COLORS[s] for s in SOLVERS}


def test_no_value_at_a_clipping_floor_zeros_are_masked(runs, figures):
    pb, trajs = runs
    for name, fig in figures.items():
        for ax in fig.axes:
            if ax.get_yscale() != "log":
                continue
            for ln in ax.lines:
                if ln.get_transform() != ax.transData:     # event markers span the axes
                    continue
                y = np.asarray(ln.get_ydata(), dtype=float)
                y = y[np.isfinite(y)]
                assert np.all(y > 0), name
                assert not np.any(np.isclose(y, 1e-17, rtol=1e-3, atol=0)), name
    # the data have exact zeros (the first sample's error, residuals at rounding): NaN there
    tr = trajs["lagrange_baumgarte"]
    zeros = tr.position_residual == 0
    assert zeros.any()
    ax = [a for a in figures["summary"].axes if "position residual" in a.get_ylabel()][0]
    ln = [ln for ln in ax.lines if ln.get_gid() == "solver:lagrange_baumgarte"][0]
    assert np.all(np.isnan(np.asarray(ln.get_ydata())[zeros]))


def test_one_legend_per_figure_outside_the_data(figures):
    for name, fig in figures.items():
        if name == "four_bar_frames":       # one run: the title names it, no legend
            n = len(fig.legends) + sum(ax.get_legend() is not None for ax in fig.axes)
            assert n == 0
            continue
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert len(legends) == 1, name
        leg = legends[0]
        host = leg.axes if leg in [ax.get_legend() for ax in fig.axes] else None
        assert host is None or not host.axison, name     # a figure legend or its own panel


def test_titles_are_readable_and_name_solver_and_settings(figures):
    for name, fig in figures.items():
        title = fig._suptitle.get_text()
        assert "four_bar" not in title and "four-bar" in title, title
        assert "rtol = atol = 1e-11" in title or "rk4" in title, title
    assert "solver qp" in figures["run"]._suptitle.get_text()
    assert "solver closed_form" in figures["four_bar_frames"]._suptitle.get_text()
    leg = [ax.get_legend() for ax in figures["summary"].axes if ax.get_legend()][0]
    texts = [t.get_text() for t in leg.get_texts()]
    assert any(t.startswith("ga (rk4, dt 0.001 s, to t = 0.02 s") for t in texts), texts
    assert any(t.startswith("lagrange_baumgarte (solver lagrange, Baumgarte") for t in texts)


def test_agreement_of_the_exact_solvers_is_annotated(runs, figures):
    pb, trajs = runs
    names, d = plotting.agreement(pb, trajs, "th1")
    assert names == ["closed_form", "lagrange", "qp"] and 0 <= d < 1e-8
    leg = [ax.get_legend() for ax in figures["summary"].axes if ax.get_legend()][0]
    title = leg.get_title().get_text()
    assert "closed_form, lagrange, qp coincide" in title and f"{d:.1e} rad" in title


def test_frames_share_one_scale(figures):
    axs = data_axes(figures["four_bar_frames"])
    assert len(axs) == 4
    for ax in axs[1:]:
        assert ax.get_xlim() == axs[0].get_xlim() and ax.get_ylim() == axs[0].get_ylim()
    fig = figures["four_bar_frames"]
    fig.canvas.draw()
    sizes = {(round(ax.get_position().width, 4), round(ax.get_position().height, 4))
             for ax in axs}
    assert len(sizes) == 1
    assert all(ax.get_aspect() == 1.0 for ax in axs)


def test_files_of_compare(runs, tmp_path):
    pb, trajs = runs
    names = plotting.comparison_figures(pb, trajs, tmp_path)
    assert names == ["four_bar_y1_ga_vs_lagrange.png", "four_bar_multipliers.png",
                     "four_bar_frames.png"]
    fig = plotting.summary_figure(pb, trajs, path=tmp_path / "s.png")
    assert fig.axes and all((tmp_path / n).stat().st_size > 1000 for n in names + ["s.png"])


def test_units_derived_from_the_constraint_rows():
    d = plotting._derived_unit
    four_bar_units = {"energy": "J", "constraints": ("m", "rad"), "x": "m", "phi": "rad"}
    assert d(four_bar_units, "position_residual") == "m, rad"
    assert d(four_bar_units, "velocity_residual") == "m/s, rad/s"
    assert d(four_bar_units, "multipliers") == "N, N m"
    assert d(four_bar_units, "constraint_force", ("x", "phi")) == "N, N m"
    # the pendulum's row x^2 + y^2 - l^2: lam 2 x is a force, so lam is in J/m^2
    assert d({"energy": "J", "constraints": ("m^2",)}, "multipliers") == "J/m^2"
    # a knife edge f(q, v) in m/s: f_v a = ..., lam f_v is a force: lam in N
    knife = {"energy": "J", "constraints": ("m/s",)}
    assert d(knife, "velocity_residual", level="nonholonomic") == "m/s"
    assert d(knife, "multipliers", level="nonholonomic") == "N"
    # no stated unit, or rows of mixed levels without explicit entries: "?", not a guess
    assert d({}, "multipliers") == "?" and d({}, "constraint_force", ("x",)) == "?"
    assert d(knife, "multipliers", level="mixed") == "?"
    assert d({**knife, "multipliers": "N, N m"}, "multipliers", level="mixed") == "N, N m"
    assert plotting._label("g", "m/s^2") == "g [m/s\u00b2]"
