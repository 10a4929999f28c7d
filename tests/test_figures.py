"""Every figure the command line writes, inspected as the matplotlib Figure it saved.

`gaussopt run --plot` (the four-bar, the bouncing ball), `gaussopt compare` (the four-bar,
the double parallelogram, a problem module of this file, the bouncing ball: a contact
problem, the heavy top: a spatial one) and `gaussopt sweep` run in this process on short
spans while ``Figure.savefig`` is recorded; every PNG they write must be one of the
recorded figures, and each is checked: units on every axis (those `gaussopt show` knows
for the sweeps; never "[?]"), the singular positions (rank events) marked wherever the
run had them, the energy drift relative to a stated energy scale, no line at a clipping
floor (rounding zeros of the multipliers left out), one colour per solver, one legend,
readable titles; on a contact run the impacts marked, the output that moves plotted and
the energy lost at the impacts apart from the drift; a spatial mechanism drawn in 3-D with
equal axes.

The tests that inspect the commands' figures are slow tests (``-m slow``). The runs:
the four-bar over 0.7 s passes its first singular position (cos th1 = 0) at
t ~ 0.58 s; the double parallelogram over 1.2 s passes its folds th = 0 and th = -pi;
the GA row of the four-bar runs its own 0.2 s; the ball bounces twice in 1.2 s and its
impacts accumulate at 1.978 s (then it rests) in 2.5 s; the heavy top runs 0.3 s.
"""

import re
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import gaussopt as go  # noqa: E402
import gaussopt.study.plotting as plotting  # noqa: E402
from gaussopt.study.cli import main  # noqa: E402
from gaussopt_problems import (bouncing_ball, double_parallelogram, four_bar,  # noqa: E402
                               rocking_block)

UNIT = re.compile(r"\[[^\]?]+\]")   # "[rad]", "[m/s, rad/s]"; not "[?]"
SOLVERS = ("closed_form", "lagrange", "lagrange_baumgarte", "qp", "ga")

# A bead on a straight rail at angle a, pushed along the rail (3 N); a sideways push
# 2 (t - 0.5) N starts at t = 0.5 s. Until then the rail carries no load: its
# multiplier is exactly 0 in exact arithmetic, and computed it is rounding noise.
RAIL = textwrap.dedent('''
    """A bead pushed along a straight rail; a sideways push from t = 0.5 s."""
    import numpy as np

    import gaussopt as go

    A = 0.7


    def build(t_end: float = 1.0) -> go.Problem:
        """The rail problem.

        Parameters
        ----------
        t_end : float
            End time [s].
        """
        along = np.array([np.cos(A), np.sin(A)])
        normal = np.array([-np.sin(A), np.cos(A)])

        def force(t, q, v):
            return 3.0 * along + 2.0 * max(0.0, t - 0.5) * normal

        rail = go.Holonomic(lambda t, q: np.array([q[1] - np.tan(A) * q[0]]))
        system = go.System(("x", "y"), mass=np.eye(2), force=force, constraints=[rail],
                           name="rail")
        return go.Problem(
            name="rail", system=system, q0=np.zeros(2), v0=along.copy(),
            t_span=(0.0, t_end), description="A bead pushed along a straight rail.",
            settings={"rtol": 1e-10, "atol": 1e-10,
                      "t_eval": np.linspace(0.0, t_end, 101)},
            outputs=lambda q, v: {"x": np.atleast_2d(q)[:, 0]},
            solvers=("closed_form", "lagrange", "qp"),
            units={"x": "m", "y": "m", "energy": "J", "constraints": ("m",)})
''')

EXPECTED = {"run.png", "cmp/four_bar_compare.png", "cmp/four_bar_y1_ga_vs_lagrange.png",
            "cmp/four_bar_multipliers.png", "cmp/four_bar_frames.png",
            "dp/double_parallelogram_compare.png", "dp/double_parallelogram_multipliers.png",
            "dp/double_parallelogram_frames.png",
            "rail/rail_compare.png", "rail/rail_multipliers.png",
            "ball.png", "bb/bouncing_ball_compare.png", "bb/bouncing_ball_multipliers.png",
            "bb/bouncing_ball_frames.png",
            "ht/heavy_top_compare.png", "ht/heavy_top_multipliers.png",
            "ht/heavy_top_frames.png",
            "sw/final_th1_vs_psi.png", "sw/final_y1_vs_psi.png",
            "sw/max_err_th1_vs_psi.png", "sw/max_err_y1_vs_psi.png"}
SWEEP = {n for n in EXPECTED if n.startswith("sw/")}
CONTACT = ("ball.png", "bb/bouncing_ball_compare.png", "bb/bouncing_ball_multipliers.png")
# runs without singular positions
NO_EVENTS = ("rail", "ball", "bb", "ht")

# the eight commands take ~35 s of CPU together (measured warm: 37 s user for every slow
# test of this file; most of it loading the compiled models
# and the GA's 200 steps), once for every test that inspects their figures
slow = pytest.mark.slow


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """Run the CLI commands that write figures; ``(dir, {relative name: (Figure, dpi)})``."""
    d = tmp_path_factory.mktemp("figures")
    (d / "rail.py").write_text(RAIL)
    saved = {}
    original = Figure.savefig

    def record(self, fname, *args, **kwargs):
        saved[Path(fname).resolve()] = (self, kwargs.get("dpi"))
        return original(self, fname, *args, **kwargs)

    commands = [
        ["run", "four_bar", "--t-end", "0.7", "--save", str(d / "run.npz"),
         "--plot", str(d / "run.png")],
        ["compare", "four_bar", "--t-end", "0.7", "--out", str(d / "cmp")],
        ["compare", "double_parallelogram", "--t-end", "1.2", "--solvers",
         "closed_form,lagrange,qp", "--out", str(d / "dp")],
        ["compare", str(d / "rail.py"), "--out", str(d / "rail")],
        ["run", "bouncing_ball", "--t-end", "1.2", "--save", str(d / "ball.npz"),
         "--plot", str(d / "ball.png")],
        ["compare", "bouncing_ball", "--t-end", "2.5", "--solvers", "closed_form,lagrange",
         "--out", str(d / "bb")],
        ["compare", "heavy_top", "--t-end", "0.3", "--out", str(d / "ht")],
        ["sweep", "four_bar", "--param", "psi=300,450", "--param", "t_end=0.7", "--solver",
         "closed_form", "--solver", "lagrange", "--workers", "1", "--out", str(d / "sw")],
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", record)
        codes = [main(c) for c in commands]
    assert codes == [0] * len(commands)
    written = {p.resolve() for p in d.rglob("*.png")}
    assert written == set(saved), "a PNG was written that was not inspected"
    figs = {str(p.relative_to(d.resolve())): v for p, v in saved.items()}
    yield d, figs
    for fig, _ in figs.values():
        plt.close(fig)


@pytest.fixture(scope="module")
def figures(cli):
    return {name: fig for name, (fig, _) in cli[1].items()}


@pytest.fixture(scope="module")
def runs(cli):
    """The trajectories the commands saved, by figure directory and solver."""
    d = cli[0]
    out = {"run.png": {"closed_form": go.load(d / "run.npz")},
           "ball.png": {"closed_form": go.load(d / "ball.npz")}}
    for sub, name in (("cmp", "four_bar"), ("dp", "double_parallelogram"), ("rail", "rail"),
                      ("bb", "bouncing_ball"), ("ht", "heavy_top")):
        trajs = {p.stem[len(name) + 1:]: go.load(p) for p in sorted((d / sub).glob("*.npz"))}
        for fig in EXPECTED:
            if fig.startswith(sub + "/"):
                out[fig] = trajs
    return out


def data_axes(fig):
    """Axes that show data (lines), not the legend panel (a 3-D Axes draws its own axes:
    ``axison`` is False there)."""
    return [ax for ax in fig.axes if (ax.axison or ax.name == "3d") and ax.lines]


def time_axes(fig):
    """Axes against time (their own or a shared sibling's x label is t [s])."""
    return [ax for ax in data_axes(fig)
            if any(a.get_xlabel() == "t [s]" for a in ax.get_shared_x_axes().get_siblings(ax))]


def event_lines(ax):
    return [ln for ln in ax.lines if ln.get_gid() == "rank_event"]


def solver_lines(fig):
    return [ln for ax in fig.axes for ln in ax.lines
            if (ln.get_gid() or "").startswith("solver:")]


def legend_texts(fig):
    legs = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [t.get_text() for leg in legs for t in leg.get_texts()]


@slow
def test_every_png_the_cli_writes_is_an_inspected_figure(cli):
    d, figs = cli
    assert set(figs) == EXPECTED
    for name, (fig, dpi) in figs.items():
        # the file is this figure: its pixel size is the figure's size times its dpi
        # (matplotlib rounds each side to a whole pixel: 1 px)
        img = matplotlib.image.imread(d / name)
        w, h = fig.get_size_inches() * dpi
        assert abs(img.shape[0] - h) <= 1 and abs(img.shape[1] - w) <= 1, name


@slow
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
            labels = ax.get_xlabel() + ax.get_ylabel()
            if ax.name == "3d":
                assert UNIT.search(ax.get_zlabel()), (name, ax.get_zlabel())
                labels += ax.get_zlabel()
            assert "?" not in labels, (name, labels)
    # every label of every axis, with data or not (a twin axis, an empty panel)
    for name, fig in figures.items():
        for ax in fig.axes:
            assert "[?]" not in ax.get_xlabel() + ax.get_ylabel(), name


@slow
def test_units_follow_from_the_problem(figures):
    labels = {ax.get_ylabel() for n, f in figures.items() if n.startswith(("cmp", "run"))
              for ax in f.axes}
    # th1 in rad, y1 in m; residuals of Phi = (l sin th1 - l sin th2 [m], th1 + th3 - pi [rad]);
    # multipliers energy / row unit; M a - F energy / coordinate unit (all rad)
    for want in ("th1 [rad]", "y1 [m]", "[m, rad]", "[m/s, rad/s]", "[N, N m]", "y [m]"):
        assert any(want in s for s in labels), (want, labels)
    mult = figures["cmp/four_bar_multipliers.png"].axes
    assert "lambda" in mult[0].get_ylabel() and mult[0].get_ylabel().endswith("[N, N m]")
    assert "M a - F" in mult[1].get_ylabel() and mult[1].get_ylabel().endswith("[N m]")
    # the double parallelogram: body coordinates in m and rad, joint rows in m
    dp = {ax.get_ylabel() for ax in figures["dp/double_parallelogram_compare.png"].axes}
    assert any(s == "th [rad]" for s in dp) and any(s.endswith("[m]") for s in dp)


@slow
def test_sweep_axes_carry_the_units_gaussopt_show_knows(figures, capsys):
    # `gaussopt show four_bar` prints them: psi's from build()'s docstring, th1's and
    # y1's from the problem's units
    assert main(["show", "four_bar"]) == 0
    shown = capsys.readouterr().out
    assert "[N m]" in shown and "th1 [rad]" in shown and "y1 [m]" in shown
    want = {"sw/final_th1_vs_psi.png": "final_th1 [rad]", "sw/final_y1_vs_psi.png":
            "final_y1 [m]", "sw/max_err_th1_vs_psi.png": "max_err_th1 [rad]",
            "sw/max_err_y1_vs_psi.png": "max_err_y1 [m]"}
    for name, ylabel in want.items():
        (ax,) = data_axes(figures[name])
        assert ax.get_xlabel() == "psi [N m]" and ax.get_ylabel() == ylabel, name
        assert [list(ln.get_xdata()) for ln in ax.lines] == [[300.0, 450.0]] * 2
        assert {ln.get_label() for ln in ax.lines} == {"solver=closed_form", "solver=lagrange"}
        assert len({matplotlib.colors.to_hex(ln.get_color()) for ln in ax.lines}) == 2


def test_sweep_column_units():
    u = plotting.sweep_units(four_bar, {"psi": 300.0})
    assert u["psi"] == "N m" and u["m"] == "kg" and u["g"] == "m/s^2" and u["th1"] == "rad"
    col = plotting.sweep_column_unit
    assert col(u, "final_y1") == "m" and col(u, "max_err_th1") == "rad"
    assert col(u, "max_energy_drift") == "J" and col(u, "t_final") == "s"
    assert col(u, "max_pos_residual") == "m, rad" and col(u, "max_abs_multiplier") == "N, N m"
    assert col({}, "final_th1") == "unit not stated"        # words, never "?"
    # the double parallelogram's parameters (from its docstring) and output; a build
    # that fails with the given parameters (a bad mass) falls back to the defaults
    u = plotting.sweep_units(double_parallelogram, {"m_crank": -1.0})
    assert u["th0"] == "rad" and u["m_crank"] == "kg" and col(u, "final_th") == "rad"


def test_sweep_figure_leaves_out_failed_runs_and_says_so():
    rows = [{"m": 1.0, "solver": "qp", "success": True, "max_err_th": 1e-12},
            {"m": 2.0, "solver": "qp", "success": False, "message": "failed"},
            {"m": 3.0, "solver": "qp", "success": True, "max_err_th": 1e-8}]
    ax = plotting.plot_sweep(rows, "m", "max_err_th", params=["m"], problem="p",
                             units={"m": "kg", "th": "rad"})
    assert ax.get_title() == "p: max_err_th against m (1 failed run not drawn)"
    assert list(ax.lines[0].get_xdata()) == [1.0, 3.0]
    assert ax.get_yscale() == "log"              # errors over four decades
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("m [kg]", "max_err_th [rad]")
    plt.close(ax.figure)


@slow
def test_rank_events_are_marked_where_the_run_had_them(figures, runs):
    for name, fig in figures.items():
        if name in SWEEP or name.endswith("_frames.png") or name.endswith("ga_vs_lagrange.png"):
            continue
        trajs = runs[name]
        ev = plotting._event_run(trajs)
        if name.startswith(NO_EVENTS):       # no singular position: nothing marked
            assert ev is None
            assert not any(event_lines(ax) for ax in fig.axes), name
            assert not any("singular" in t for t in legend_texts(fig)), name
            continue
        # the four-bar passes cos th1 = 0 once in 0.7 s; the double parallelogram its
        # folds th = 0 and -pi in 1.2 s
        t_events = [e.t for e in trajs[ev].rank_events]
        assert len(t_events) == (2 if name.startswith("dp") else 1), (name, t_events)
        for ax in time_axes(fig):
            vlines = [ln for ln in event_lines(ax) if ln.get_transform() != ax.transData]
            assert sorted(ln.get_xdata()[0] for ln in vlines) == sorted(t_events), name
        assert any("singular position" in t for t in legend_texts(fig)), name
        if name.endswith("_compare.png") or name == "run.png":
            # diamonds on the output at the events
            ax = time_axes(fig)[0]
            (marks,) = [ln for ln in event_lines(ax) if ln.get_transform() == ax.transData]
            key = "th" if name.startswith("dp") else "th1"
            pb = double_parallelogram.build() if name.startswith("dp") else four_bar.build()
            tr = trajs[ev]
            assert np.allclose(marks.get_xdata(), t_events)
            # on the output, between the samples around each event
            y = pb.outputs(tr.q, tr.v)[key]
            for te, ye in zip(t_events, marks.get_ydata()):
                i = np.searchsorted(tr.t, te)
                assert min(y[i - 1], y[i]) <= ye <= max(y[i - 1], y[i]), (name, te, ye)
            # the folds th = 0 and th = -pi; the four-bar's cos th1 = 0: to the cubic
            # interpolation's error |q| h^4 / 384 (h <= 0.1 s, |q| < 100 rad/s^4:
            # < 3e-5 rad) and the event time's (< 1e-6 s at rates < 10 rad/s)
            want = [0.0, -np.pi] if name.startswith("dp") else [np.pi / 2]
            assert np.allclose(marks.get_ydata(), want, atol=1e-4), marks.get_ydata()


@slow
def test_frames_show_the_singular_position(figures, runs):
    fig = figures["cmp/four_bar_frames.png"]
    titles = [ax.get_title() for ax in data_axes(fig)]
    t_event = runs["cmp/four_bar_frames.png"]["closed_form"].rank_events[0].t
    assert titles[0] == "t = 0 s" and titles[-1] == "t = 0.7 s"
    assert f"t = {t_event:.3g} s\nsingular position (rank event)" in titles, titles
    # the drawing at the singular position: the crank vertical (cos th1 = 0), to the
    # interpolation's error (< 1e-4 rad, as above) times l = 2 m
    ax = data_axes(fig)[titles.index(f"t = {t_event:.3g} s\nsingular position (rank event)")]
    crank = ax.lines[0]
    assert abs(np.diff(crank.get_xdata())[0]) < 2e-4


@slow
def test_energy_drift_relative_to_the_energy_scale(figures, runs):
    pb = four_bar.build(t_end=0.7)
    for name in ("cmp/four_bar_compare.png", "run.png"):
        fig = figures[name]
        (ax,) = [a for a in fig.axes if "E_s" in a.get_ylabel()]
        label = ax.get_ylabel()
        assert label.startswith(r"$|E - E(0)|\,/\,E_s$ [1]") and "max $T$ + range $V$" in label
        stated = float(re.search(r"= ([-+0-9.e]+) J$", label).group(1))
        # the scale: the kinetic energy v^T M v / 2 of the first run and the range of
        # the rest of its energy (the potential)
        tr = runs[name]["closed_form"]
        T = np.array([0.5 * v @ pb.system.mass(t, q) @ v for t, q, v in zip(tr.t, tr.q, tr.v)])
        V = tr.energy - T
        scale = T.max() + V.max() - V.min()
        assert abs(stated - scale) <= 5e-3 * scale        # 3 significant digits stated
        ln = [ln for ln in ax.lines if ln.get_gid() == "solver:closed_form"][0]
        drift = np.abs(tr.energy - tr.energy[0]) / scale
        y = np.asarray(ln.get_ydata())
        ok = np.isfinite(y)
        assert np.all(drift[~ok] == 0)                     # exact zeros left out
        assert np.allclose(y[ok], drift[ok], rtol=1e-12, atol=0)


@slow
def test_no_line_at_a_floor_rounding_zeros_left_out(figures, runs):
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
    # the rail: before t = 0.5 s it carries no load; computed, its multiplier is rounding
    # noise (nonzero somewhere, below 1e-13 N: a few eps times the 3 N push) ...
    trajs = runs["rail/rail_multipliers.png"]
    early = {n: tr.t < 0.5 - 1e-9 for n, tr in trajs.items()}
    noise = np.concatenate([np.abs(tr.multipliers[early[n], 0]) for n, tr in trajs.items()])
    assert noise.max() < 1e-13 and np.any(noise > 0)
    # ... which the figure leaves out of both panels, drawing every loaded sample
    # (from t = 0.51 s the load 2 (t - 0.5) N >= 0.02 N is far above rounding)
    fig = figures["rail/rail_multipliers.png"]
    for ax in fig.axes[:2]:
        for ln in [ln for ln in ax.lines if (ln.get_gid() or "").startswith("solver:")]:
            solver = ln.get_gid().split(":", 1)[1]
            y = np.asarray(ln.get_ydata())
            assert np.all(np.isnan(y[early[solver]])), solver
            assert np.all(np.isfinite(y[trajs[solver].t > 0.505])), solver
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "rounding_note"]
    assert len(notes) == 1 and "closed_form 51 of 101" in notes[0], notes
    # the four-bar's forces never vanish: no note there
    assert not any(t.get_gid() == "rounding_note"
                   for ax in figures["cmp/four_bar_multipliers.png"].axes for t in ax.texts)
    # exact zeros (the first sample's error, residuals at rounding): NaN there
    tr = runs["cmp/four_bar_compare.png"]["lagrange_baumgarte"]
    zeros = tr.position_residual == 0
    assert zeros.any()
    ax = [a for a in figures["cmp/four_bar_compare.png"].axes
          if "position residual" in a.get_ylabel()][0]
    ln = [ln for ln in ax.lines if ln.get_gid() == "solver:lagrange_baumgarte"][0]
    assert np.all(np.isnan(np.asarray(ln.get_ydata())[zeros]))


@slow
def test_one_colour_per_solver_across_all_figures(figures):
    colours = {}
    for name, fig in figures.items():
        for ln in solver_lines(fig):
            solver = ln.get_gid().split(":", 1)[1]
            c = matplotlib.colors.to_hex(ln.get_color())
            colours.setdefault(solver, set()).add(c)
    assert set(SOLVERS) <= set(colours)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)
    # the sweep's lines (one per solver) and the legend swatches carry the same colours
    for name in SWEEP:
        for ln in data_axes(figures[name])[0].lines:
            solver = ln.get_label().split("=", 1)[1]
            assert matplotlib.colors.to_hex(ln.get_color()) in colours[solver]
    fig = figures["cmp/four_bar_compare.png"]
    leg = [ax.get_legend() for ax in fig.axes if ax.get_legend()][0]
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


@slow
def test_time_label_only_on_the_bottom_axis_of_a_column(figures):
    for name in ("cmp/four_bar_compare.png", "cmp/four_bar_multipliers.png",
                 "cmp/four_bar_y1_ga_vs_lagrange.png", "dp/double_parallelogram_compare.png"):
        fig = figures[name]
        with_t = [ax for ax in data_axes(fig) if ax.get_xlabel() == "t [s]"]
        columns = {round(ax.get_position().x0, 2) for ax in data_axes(fig)}
        assert len(with_t) == len(columns), (name, len(with_t), columns)
        for ax in with_t:      # nothing below it in its column
            below = [a for a in data_axes(fig) if a is not ax
                     and abs(a.get_position().x0 - ax.get_position().x0) < 0.01
                     and a.get_position().y0 < ax.get_position().y0]
            assert not below, name


@slow
def test_one_legend_per_figure_outside_the_data(figures):
    for name, fig in figures.items():
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        if name.endswith("_frames.png"):       # one run: the title names it, no legend
            assert not legends
            continue
        assert len(legends) == 1, name
        leg = legends[0]
        host = leg.axes if leg in [ax.get_legend() for ax in fig.axes] else None
        if name in SWEEP:                      # a single panel: the legend inside it
            continue
        assert host is None or not host.axison, name     # a figure legend or its own panel


@slow
def test_titles_are_readable_and_name_solver_and_settings(figures):
    for name, fig in figures.items():
        if name in SWEEP:
            assert fig.axes[0].get_title() == f"four_bar: {name[3:-11]} against psi"
            continue
        title = fig._suptitle.get_text()
        assert "_" not in title.split("\n")[0], title
        if name.startswith(("cmp", "run")):
            assert "four-bar" in title, title
            assert "rtol = atol = 1e-11" in title or "rk4" in title, title
    assert "solver closed_form" in figures["run.png"]._suptitle.get_text()
    assert "solver closed_form" in figures["cmp/four_bar_frames.png"]._suptitle.get_text()
    texts = legend_texts(figures["cmp/four_bar_compare.png"])
    assert any(t.startswith("ga (rk4, dt 0.001 s, to t = 0.2 s") for t in texts), texts
    assert any(t.startswith("lagrange_baumgarte (solver lagrange, Baumgarte") for t in texts)


@slow
def test_agreement_of_the_exact_solvers_is_annotated(figures, runs):
    pb = four_bar.build(t_end=0.7)
    names, d = plotting.agreement(pb, runs["cmp/four_bar_compare.png"], "th1")
    assert names == ["closed_form", "lagrange", "qp"] and 0 <= d < 1e-8
    fig = figures["cmp/four_bar_compare.png"]
    leg = [ax.get_legend() for ax in fig.axes if ax.get_legend()][0]
    title = leg.get_title().get_text()
    assert "closed_form, lagrange, qp coincide" in title and f"{d:.1e} rad" in title


@slow
def test_frames_share_one_scale(figures):
    fig = figures["cmp/four_bar_frames.png"]
    axs = data_axes(fig)
    assert len(axs) == 4
    for ax in axs[1:]:
        assert ax.get_xlim() == axs[0].get_xlim() and ax.get_ylim() == axs[0].get_ylim()
    fig.canvas.draw()
    sizes = {(round(ax.get_position().width, 4), round(ax.get_position().height, 4))
             for ax in axs}
    assert len(sizes) == 1
    assert all(ax.get_aspect() == 1.0 for ax in axs)


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
    # no stated unit, or rows of mixed levels without explicit entries: words, not a guess
    # (and never "?")
    assert d({"energy": "J"}, "multipliers") == "J per unit of the constraint"
    assert d({}, "position_residual") == "units of the constraint"
    assert d({}, "constraint_force", ("x",)) == "energy unit per unit of the coordinate"
    assert d({"energy": "J"}, "constraint_force", ("x",)) == "J per unit of the coordinate"
    assert d(knife, "multipliers", level="mixed") == "J per unit of the constraint"
    assert d(four_bar_units, "velocity_residual", level="mixed") == \
        "units of the constraint rows' rates"
    assert d({**knife, "multipliers": "N, N m"}, "multipliers", level="mixed") == "N, N m"
    assert plotting._label("g", "m/s^2") == "g [m/s\u00b2]"


# ---------------------------------------------------------------- fast checks (no CLI)

def _pendulum(l=1.0, m=2.0, g=9.81):
    return go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -m * g],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - l**2]))],
                     energy=lambda t, q, v: 0.5 * m * v @ v + m * g * q[1])


def test_energy_scale_of_a_pendulum_released_horizontally():
    # released from rest at the horizontal, it passes the bottom at ~0.59 s (l = 1 m):
    # max T = m g l and V spans m g l, so E_s = 2 m g l = 39.24 J, independent of the
    # zero of the potential. Sampled every 1 ms: T near its maximum is off by
    # ~ T (w dt)^2 / 8 with w ~ 4.4 rad/s: 2.5e-6 relative.
    pend = _pendulum()
    tr = go.simulate(pend, (0.0, 1.0), [1.0, 0.0], [0.0, 0.0], rtol=1e-10, atol=1e-10,
                     t_eval=np.linspace(0.0, 1.0, 1001))
    pb = go.Problem(name="pendulum", system=pend, q0=np.array([1.0, 0.0]),
                    v0=np.zeros(2), t_span=(0.0, 1.0))
    scale, how = plotting.energy_scale(pb, tr)
    assert how == "max T + range V" and abs(scale - 2 * 2.0 * 9.81 * 1.0) < 1e-5 * scale
    ax = plotting.plot_energy({"closed_form": tr}, relative=True, problem=pb)
    assert "= 39.2 J" in ax.get_ylabel() and "E_s" in ax.get_ylabel()
    # without a system to evaluate: max |E| (here |E(0)| = 0 up to the drift: so small
    # that it is stated, not hidden)
    s2, how2 = plotting.energy_scale(None, tr)
    assert how2 == "max |E|" and s2 == np.max(np.abs(tr.energy))
    plt.close(ax.figure)


def test_rounding_zeros_of_an_unloaded_constraint_are_left_out():
    # a bead pushed along a straight rail: the rail carries no load, its multiplier is
    # rounding noise (a few eps times the 3 N push)
    a = 0.7
    along = np.array([np.cos(a), np.sin(a)])
    rail = go.System(("x", "y"), mass=np.eye(2), force=3.0 * along,
                     constraints=[go.Holonomic(lambda t, q: np.array([q[1] - np.tan(a) * q[0]]))])
    comp = go.compare(rail, ["closed_form"], t_span=(0.0, 1.0), q0=[0.0, 0.0], v0=along,
                      rtol=1e-10, atol=1e-10, t_eval=np.linspace(0.0, 1.0, 21))
    tr = comp.trajectories["closed_form"]
    lam = np.abs(tr.multipliers[:, 0])
    assert lam.max() < 1e-13 and np.any(lam > 0)        # noise a log axis would draw
    assert plotting.rounding_zeros(comp.problem, tr).all()
    a_lam, a_f = plotting.plot_multipliers(comp.trajectories, problem=comp.problem)
    for ax in (a_lam, a_f):
        assert all(np.all(np.isnan(ln.get_ydata())) for ln in ax.lines)
        assert ax.get_xlim() == (0.0, 1.0)             # the span, not matplotlib's default
    (note,) = [t for t in a_lam.texts if t.get_gid() == "rounding_note"]
    assert "carry no load" in note.get_text()
    plt.close(a_lam.figure)


def test_summary_marks_the_singular_position_of_a_run():
    pb = four_bar.build(t_end=0.7)
    tr = pb.simulate("closed_form")
    (event,) = tr.rank_events                           # cos th1 = 0 at t ~ 0.58 s
    fig = plotting.summary_figure(pb, {"closed_form": tr})
    for ax in time_axes(fig):
        xs = [ln.get_xdata()[0] for ln in event_lines(ax) if ln.get_transform() != ax.transData]
        assert xs == [event.t]
    out = time_axes(fig)[0]
    (marks,) = [ln for ln in event_lines(out) if ln.get_transform() == out.transData]
    # th1 = pi/2 there, to the cubic interpolation's error (< 3e-5 rad, see above)
    assert abs(marks.get_ydata()[0] - np.pi / 2) < 1e-4
    assert "singular position (rank 2 \u2192 1)" in legend_texts(fig)
    plt.close(fig)


# ---------------------------------------------------------------- contact and spatial runs

def impact_lines(ax):
    return [ln for ln in ax.lines if ln.get_gid() == "impact"
            and ln.get_transform() != ax.transData]


@slow
def test_contact_figures_mark_every_impact(figures, runs):
    for name in CONTACT:
        fig, tr = figures[name], runs[name]["closed_form"]
        times = sorted({im.t for im in tr.impacts})
        # 2 impacts in 1.2 s; in 2.5 s the ball's impacts accumulate (at 1.978 s) and it rests
        assert len(times) == (2 if name == "ball.png" else 22), (name, len(times))
        assert any(im.accumulation for im in tr.impacts) == (name != "ball.png")
        # at the analytic impact times: each located on the dense output to 4 eps and
        # the flights integrated at rtol = 1e-12 (errors below 1e-11 s in 2.5 s)
        assert np.allclose(times, bouncing_ball.impact_times(len(times)), rtol=0, atol=1e-9)
        for ax in time_axes(fig):
            assert sorted(ln.get_xdata()[0] for ln in impact_lines(ax)) == times, name
        assert any(t.startswith(f"impact ({len(times)} in all") for t in legend_texts(fig))


@slow
def test_contact_summary_plots_the_output_that_moves(figures, runs):
    for name in ("ball.png", "bb/bouncing_ball_compare.png"):
        out = time_axes(figures[name])[0]
        # the ball's outputs are x (0.3 m/s: 0.36 m in 1.2 s), y and vy: the height y
        # moves most among those in m, the unit of the first output
        assert out.get_ylabel() == "y [m]", out.get_ylabel()
        for ln in [ln for ln in out.lines if (ln.get_gid() or "").startswith("solver:")]:
            assert np.ptp(ln.get_ydata()) > 1.0          # from 1.3 m down to r = 0.1 m
        # triangles on the output at the impacts: the ball's centre at r = 0.1 m there
        (marks,) = [ln for ln in out.lines if ln.get_gid() == "impact"
                    and ln.get_transform() == out.transData]
        assert np.allclose(marks.get_ydata(), 0.1, atol=1e-9)
    assert plotting.moving_output(bouncing_ball.build(t_end=1.2), runs["ball.png"]) == "y"


@slow
def test_contact_energy_balance_keeps_the_losses_apart_from_drift(figures, runs, cli):
    m, r, h, e, g = 0.7, 0.1, 1.3, 0.6, 9.81
    for name in ("ball.png", "bb/bouncing_ball_compare.png"):
        fig, tr = figures[name], runs[name]["closed_form"]
        (ax,) = [a for a in fig.axes if "E_s" in a.get_ylabel()]
        assert ax.get_ylabel().startswith(r"$|E - E(0) + L|\,/\,E_s$, $L\,/\,E_s$ [1]")
        scale = float(re.search(r"= ([-+0-9.e]+) J$", ax.get_ylabel()).group(1))
        (loss,) = [ln for ln in ax.lines if ln.get_gid() == "impact_loss"]
        # the k-th impact takes (1 - e^2) e^(2(k-1)) m g (h - r); all of them together
        # (the accumulation included) the whole m g (h - r) less the rest's 0: the stated
        # scale has 3 digits (5e-3 relative)
        n = len(tr.impacts)
        want = (1 - e**(2 * n)) * m * g * (h - r) if n < 22 else m * g * (h - r)
        assert abs(np.nanmax(loss.get_ydata()) * scale - want) <= 5e-3 * want, name
        # the drift: E - E(0) + L, the integration's own error: DOP853 at
        # rtol = atol = 1e-12 over fewer than 100 steps, each off by at most 1e-12 of the
        # energy: below 1e-10 of the scale
        drift = [ln for ln in ax.lines if ln.get_gid() == "solver:closed_form"][0]
        assert np.nanmax(drift.get_ydata()) < 1e-10, name
        assert {"energy lost at impacts (L)"} <= set(legend_texts(fig))
    # the comparison table: the drift is not the loss
    import csv
    rows = list(csv.DictReader(open(cli[0] / "bb" / "table.csv")))
    for row in rows:
        assert float(row["max_energy_drift"]) < 1e-10 * m * g * h
        assert abs(float(row["energy_lost_impacts"]) - m * g * (h - r)) < 1e-9 * m * g * h


@slow
def test_multipliers_linear_within_a_decade_log_beyond(figures):
    # the resting ball's normal force m g is constant: a linear axis; flying, the
    # contact carries no load (rounding zeros, left out as before)
    a_lam, a_f = figures["bb/bouncing_ball_multipliers.png"].axes[:2]
    assert a_lam.get_yscale() == a_f.get_yscale() == "linear"
    y = np.concatenate([ln.get_ydata() for ln in a_lam.lines
                        if (ln.get_gid() or "").startswith("solver:")])
    assert np.allclose(y[np.isfinite(y)], 0.7 * 9.81, rtol=1e-9)
    notes = [t.get_text() for t in a_lam.texts if t.get_gid() == "rounding_note"]
    assert len(notes) == 1 and "closed_form" in notes[0]
    # the four-bar's multipliers grow without bound at its singular position
    a_lam, _ = figures["cmp/four_bar_multipliers.png"].axes[:2]
    assert a_lam.get_yscale() == "log"


@slow
def test_spatial_mechanism_drawn_in_3d_with_equal_axes(figures):
    fig = figures["ht/heavy_top_frames.png"]
    axs = data_axes(fig)
    assert len(axs) == 4 and all(ax.name == "3d" for ax in axs)
    for ax in axs:
        lims = np.array([ax.get_xlim(), ax.get_ylim(), ax.get_zlim()])
        assert np.allclose(np.diff(lims, axis=1), np.diff(lims, axis=1)[0])   # one length
        assert np.allclose(ax.get_box_aspect() / ax.get_box_aspect()[0], 1.0)  # a cube
        assert np.allclose(lims, np.array([axs[0].get_xlim(), axs[0].get_ylim(),
                                           axs[0].get_zlim()]))             # one scale
        assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()) == ("x [m]", "y [m]",
                                                                       "z [m]")
    # the spatial run's units: Euler parameters dimensionless, positions in m; the rows
    # the normalization (1) and the spherical joint (m)
    labels = {ax.get_ylabel() for ax in figures["ht/heavy_top_compare.png"].axes}
    assert any(s.endswith("[1, m]") for s in labels), labels
    assert any(s.endswith("[1/s, m/s]") for s in labels), labels
    mult = figures["ht/heavy_top_multipliers.png"].axes
    assert mult[0].get_ylabel().endswith("[J, N]") and mult[1].get_ylabel().endswith("[N, J]")


# ---------------------------------------------------------------- fast checks (no CLI)

def test_units_of_multibody_models():
    from gaussopt import multibody as mb
    from gaussopt.multibody import spatial as sp
    from gaussopt.study.units import model_units

    rod = sp.Body.uniform_rod("rod", 1.0, (0, 0, 0), (0, 0, -1))
    u = model_units(sp.Model([rod], [sp.Revolute(None, rod, point=(0, 0, 0), axis=(1, 0, 0))]))
    assert u["rod.x"] == "m" and u["rod.e2"] == "1"
    assert u["constraints"] == ("1", "m", "m", "m", "1", "1")   # p.p, point, u.f, u.g
    bar = mb.Body.uniform_rod("bar", mass=1.0, length=1.0)
    u = model_units(mb.Model([bar], [mb.Revolute(None, (0, 0), bar, (-0.5, 0))]))
    assert u["bar.phi"] == "rad" and u["constraints"] == ("m", "m")


def test_moving_output_by_the_range_of_the_motion():
    pb = bouncing_ball.build(t_end=1.2)
    t = np.linspace(0.0, 1.0, 11)
    q = np.column_stack([0.1 * t, 1.3 - 4.9 * t**2])      # x slowly, y fast
    tr = go.Trajectory(t=t, q=q, v=np.zeros_like(q), a=np.zeros_like(q),
                       constraint_force=np.zeros_like(q), multipliers=np.zeros((11, 0)),
                       position_residual=np.zeros(11), velocity_residual=np.zeros(11),
                       acceleration_residual=np.zeros(11), energy=None,
                       rank=np.zeros(11, dtype=int), sigma_min=np.ones(11),
                       coordinates=("x", "y"))
    assert plotting.moving_output(pb, tr) == "y"
    # a rocking block's outputs th [rad], w [rad/s]: th, the first unit's only output
    pb = rocking_block.build()
    tr.coordinates = ("x", "y", "th")
    tr.q = np.column_stack([q, 0.1 * t])
    tr.v = np.zeros_like(tr.q)
    assert plotting.moving_output(pb, tr) == "th"


def test_rocking_block_reference_rests_after_the_accumulation():
    # the impacts accumulate at ~3.88 s: the reference was NaN from there (max_err_th nan)
    pb = rocking_block.build()
    ref = pb.reference(np.array([0.0, 1.0, 3.95, 4.0]))
    assert np.all(np.isfinite(ref["th"])) and np.all(np.isfinite(ref["w"]))
    assert np.all(ref["th"][2:] == 0.0) and np.all(ref["w"][2:] == 0.0)


def test_energy_balance_of_sliding_friction():
    # a block (1 kg) launched at 2 m/s along a rough floor (mu = 0.3) stops after
    # v0 / (mu g) = 0.68 s: friction dissipates all of its kinetic energy, 2 J
    from gaussopt.study.energy_balance import energy_balance

    mu, m, g, v0 = 0.3, 1.0, 9.81, 2.0
    floor = go.Contact(lambda t, q: np.array([q[1]]), slip=lambda t, q: np.array([q[0]]),
                       friction=mu, rheonomic=False, name="floor")
    block = go.System(("x", "y"), mass=m * np.eye(2), force=[0.0, -m * g],
                      constraints=[floor], energy=lambda t, q, v: 0.5 * m * v @ v + m * g * q[1])
    h = 0.005
    tr = go.simulate(block, (0.0, 1.0), [0.0, 0.0], [v0, 0.0], rtol=1e-10, atol=1e-10,
                     t_eval=np.linspace(0.0, 1.0, 201))
    bal = energy_balance(tr, block)
    assert bal.friction_source == "model" and not tr.impacts
    # the friction power -mu m g v(t) is linear in t but for the kink where the block
    # stops, between two samples: the quadrature takes each side of it from its own side
    # (the stop is a transition of the run), exact for this power; the trapezoidal rule
    # over that step is off by at most (mu g)(mu m g) h^2 / 8 (3e-5 J), which bounds
    # the error estimate. The integration's energy error is 1e-9 J
    bound = (mu * g) * (mu * m * g) * h**2 / 8
    assert abs(bal.friction_loss[-1] - 0.5 * m * v0**2) <= 1e-8
    assert np.max(np.abs(bal.drift)) <= 1e-8
    assert bal.friction_error <= bound + 1e-9
    # without the system the slip rates are unknown: said, not guessed
    assert energy_balance(tr).friction_source == "unknown"


def test_friction_work_of_a_pushed_block_is_integrated_to_the_runs_accuracy():
    """A block (1 kg, mu = 0.3) launched at 2 m/s and pushed forward by ``c t`` (c = 2 N/s)
    slides with ``v(t) = v0 - mu g t + c t^2 / (2 m)`` for the 0.5 s of the run: friction
    dissipates ``mu m g (v0 T - mu g T^2 / 2 + c T^3 / (6 m))`` (closed form). Its power
    is quadratic in t: Simpson's rule on 26 samples is exact, the trapezoidal rule is off
    by ``T h^2 |p''| / 12 = 9.8e-5 J`` (``p'' = -mu g c``), which is what
    ``friction_error`` estimates. Bound on the loss: the run's own error (rtol 1e-10 on
    velocities of ~2 m/s over 0.5 s: ~1e-9 J) times 100."""
    from gaussopt.study.energy_balance import energy_balance

    mu, m, g, v0, c, T = 0.3, 1.0, 9.81, 2.0, 2.0, 0.5
    floor = go.Contact(lambda t, q: np.array([q[1]]), slip=lambda t, q: np.array([q[0]]),
                       friction=mu, rheonomic=False, name="floor")
    block = go.System(("x", "y"), mass=m * np.eye(2),
                      force=lambda t, q, v: np.array([c * t, -m * g]),
                      constraints=[floor], energy=lambda t, q, v: 0.5 * m * v @ v + m * g * q[1])
    tr = go.simulate(block, (0.0, T), [0.0, 0.0], [v0, 0.0], rtol=1e-10, atol=1e-10,
                     t_eval=np.linspace(0.0, T, 26))
    assert tr.success and not tr.impacts
    # (rtol = atol = 1e-10 on velocities of ~2 m/s: errors ~1e-10 m/s, bound 100x that)
    np.testing.assert_allclose(tr.v[:, 0], v0 - mu * g * tr.t + c * tr.t ** 2 / (2 * m),
                               rtol=0, atol=1e-8)
    bal = energy_balance(tr, block)
    exact = mu * m * g * (v0 * T - mu * g * T ** 2 / 2 + c * T ** 3 / (6 * m))
    assert abs(bal.friction_loss[-1] - exact) <= 1e-7
    # the estimate |W_S - W_T| is the trapezoid's error, exactly T h^2 |p''| / 12 for a
    # quadratic power on equal steps, up to the run's error in the power (~1e-9 J, far
    # below the 1 % = 1e-6 J allowed)
    h = T / 25
    trapezoid_error = T * h ** 2 * (mu * g * c) / 12
    assert abs(bal.friction_error - trapezoid_error) <= 0.01 * trapezoid_error


def _kinematic_run(coordinates, q):
    N = len(q)
    z = np.zeros_like(q)
    return go.Trajectory(t=np.linspace(0.0, 1.0, N), q=q, v=z, a=z, constraint_force=z,
                         multipliers=np.zeros((N, 0)), position_residual=np.zeros(N),
                         velocity_residual=np.zeros(N), acceleration_residual=np.zeros(N),
                         energy=None, rank=np.zeros(N, dtype=int), sigma_min=np.ones(N),
                         coordinates=tuple(coordinates))


def test_animate_any_multibody_run(tmp_path):
    from PIL import Image

    from gaussopt import multibody as mb
    from gaussopt.multibody import spatial as sp

    # a planar rod swinging about its end (its states written down: only drawn)
    bar = mb.Body.uniform_rod("bar", mass=1.0, length=1.0)
    planar = mb.Model([bar], [mb.Revolute(None, (0, 0), bar, (-0.5, 0))])
    phi = np.linspace(0.0, -1.0, 9)
    tr = _kinematic_run(planar.coordinates,
                        np.column_stack([0.5 * np.cos(phi), 0.5 * np.sin(phi), phi]))
    out = plotting.animate(tr, tmp_path / "planar", model=planar, frames=3)
    assert out.suffix == ".gif" and Image.open(out).n_frames == 3
    # a spatial rod hanging from a ball joint, swinging about x (Euler parameters)
    rod = sp.Body.uniform_rod("rod", 1.0, (0, 0, 0), (0, 0, -1))
    spatial = sp.Model([rod], [sp.Spherical(None, rod, point=(0, 0, 0))])
    R0 = sp.rotation_matrix(spatial.q_reference[3:])
    q = []
    for a in np.linspace(0.0, np.pi / 2, 9):
        Rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
        q.append([0.0, 0.5 * np.sin(a), -0.5 * np.cos(a), *sp.quaternion(Rx @ R0)])
    tr3 = _kinematic_run(spatial.coordinates, np.array(q))
    out = plotting.animate(spatial, tr3, tmp_path / "spatial.gif", frames=3)
    assert Image.open(out).n_frames == 3
    # the mistakes, each named
    with pytest.raises(go.ModelError, match="`model` is needed"):
        plotting.animate(tr, tmp_path / "x.gif")
    with pytest.raises(go.ModelError, match="`traj` must be a run of the model's system"):
        plotting.animate(spatial, tr, tmp_path / "x.gif")
    from matplotlib.animation import FFMpegWriter
    if not FFMpegWriter.isAvailable():
        with pytest.raises(go.ModelError, match="needs ffmpeg"):
            plotting.animate(planar, tr, tmp_path / "x.mp4")
