"""The options of simulate: checked once into a frozen RunOptions, handed down as they are,
with solve_ivp's conventions (first_step, max_step, an empty span; a decreasing span
refused with the reason), the contact options checked by name, and the trajectory as a
table (to_dataframe, to_csv)."""

import dataclasses
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt.integrate.options import ContactOptions, RunOptions, run_options

ROOT = Path(__file__).resolve().parents[1]
L, G = 1.0, 9.81


def _pendulum():
    return go.System(("x", "y"), mass=np.eye(2), force=[0.0, -G],
                     constraints=[go.Holonomic(lambda t, q: np.array([q @ q - L**2]))],
                     energy=lambda t, q, v: 0.5 * v @ v + G * q[1], name="pendulum")


def _ball(e=0.8):
    """A ball (1 kg) over a floor: gap y, restitution e."""
    return go.System(("x", "y"), mass=np.eye(2), force=[0.0, -G],
                     constraints=[go.Contact(lambda t, q: np.array([q[1]]), restitution=e)],
                     energy=lambda t, q, v: 0.5 * v @ v + G * q[1], name="ball")


def _options(system, **kw):
    args = dict(solver="closed_form", method=None, dt=None, first_step=None, max_step=np.inf,
                rtol=1e-9, atol=1e-9, t_eval=None, stabilization=go.Projection(),
                solver_options=None, project_initial=False, consistency_tol=1e-8,
                monitor_rank=True, max_steps=100, progress=None, events=None,
                dense_output=False, max_memory=2.0**30, contact_options=None)
    args.update(kw)
    return run_options(system, (0.0, 1.0), [1.0, 0.0], [0.0, 0.0], **args)[-1]


def test_options_are_checked_once_into_a_frozen_object():
    opts = _options(_pendulum(), solver_options={"rank_tol": 1e-9}, t_eval=[0.0, 0.5, 1.0])
    assert isinstance(opts, RunOptions) and opts.method == "DOP853" and not opts.fixed_step
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.rtol = 1.0
    with pytest.raises(TypeError):
        opts.solver_options["rank_tol"] = 1.0          # a read-only view
    with pytest.raises(ValueError):
        opts.t_eval[0] = 3.0                           # a read-only array
    phase = opts.but(dense_output=True)
    assert phase.dense_output and not opts.dense_output and phase.rtol == opts.rtol
    assert _options(_pendulum(), solver="ga").method == "rk4"       # the GA's fixed step
    assert _options(_pendulum(), solver="ga").auto_dt


def test_first_step_and_max_step_as_solve_ivp():
    pend = _pendulum()
    tr = go.simulate(pend, (0.0, 1.0), [L, 0.0], [0.0, 0.0], first_step=1e-4, max_step=0.02)
    assert tr.success
    steps = np.diff(tr.t)
    assert steps[0] == pytest.approx(1e-4, rel=1e-12)      # the first step taken as given
    assert steps.max() <= 0.02 * (1 + 1e-12)               # no step longer than max_step
    free = go.simulate(pend, (0.0, 1.0), [L, 0.0], [0.0, 0.0])
    assert np.diff(free.t).max() > 0.02                    # (the bound did bind)
    # the implicit methods take them too (through scipy)
    tr = go.simulate(pend, (0.0, 0.5), [L, 0.0], [0.0, 0.0], method="Radau", max_step=0.01)
    assert tr.success and np.diff(tr.t).max() <= 0.01 * (1 + 1e-12)
    # dt is the first step's older name for the adaptive methods
    assert go.simulate(pend, (0.0, 0.1), [L, 0.0], [0.0, 0.0], dt=1e-4).t[1] == \
        pytest.approx(1e-4, rel=1e-12)


@pytest.mark.parametrize("kw, words", [
    (dict(method="rk4", dt=0.01, first_step=0.1), "`first_step` applies to the adaptive"),
    (dict(method="rk4", dt=0.01, max_step=0.1), "`max_step` applies to the adaptive"),
    (dict(dt=0.1, first_step=0.2), "`dt` and `first_step` both give the first step"),
    (dict(first_step=-1.0), "`first_step` must be a positive first step"),
    (dict(max_step=0.0), "`max_step` must be positive"),
    (dict(max_step=float("nan")), "`max_step` must be positive"),
    (dict(dense_output="yes"), "`dense_output` must be True or False"),
    (dict(monitor_rank=1), "`monitor_rank` must be True or False"),
    (dict(solver_options=[1]), "`solver_options` must be a dict"),
    (dict(events=[1.0]), "`events[0]` must be a callable"),
    (dict(contact_options={"max_impacts": 3}), "`contact_options` applies to systems with Contact"),
])
def test_bad_options_are_named(kw, words):
    with pytest.raises(go.ModelError, match=re.escape(words)):
        go.simulate(_pendulum(), (0.0, 1.0), [L, 0.0], [0.0, 0.0], **kw)


def test_a_decreasing_span_says_why_and_an_empty_one_is_the_initial_state():
    pend = _pendulum()
    with pytest.raises(go.ModelError, match="forward in time only") as e:
        go.simulate(pend, (1.0, 0.0), [L, 0.0], [0.0, 0.0])
    assert "(q0, -v0)" in str(e.value)                     # what to do instead
    tr = go.simulate(pend, (0.5, 0.5), [L, 0.0], [0.0, 0.0], dense_output=True)
    assert tr.success and tr.status == 0 and tr.t.tolist() == [0.5]
    np.testing.assert_array_equal(tr.q[0], [L, 0.0])
    np.testing.assert_allclose(tr.a[0], [0.0, -G], atol=1e-14)   # at rest, horizontal
    q, v = tr.sol(0.5)
    np.testing.assert_array_equal(q, [L, 0.0])


@pytest.mark.parametrize("options, words", [
    ({"zeno_heigth": 1e-6}, "did you mean 'zeno_height'"),
    ({"zeno_height": 0.0}, "`contact_options['zeno_height']` must be positive"),
    ({"zeno_height": -1e-6}, "`contact_options['zeno_height']` must be positive"),
    ({"zeno_height": float("nan")}, "`contact_options['zeno_height']` must be positive"),
    ({"max_impacts": True}, "`contact_options['max_impacts']` must be an integer"),
    ({"max_impacts": -1}, "`contact_options['max_impacts']` must be an integer >= 0"),
    ([("max_impacts", 3)], "`contact_options` must be a dict"),
])
def test_contact_options_are_checked_by_name_before_the_run(options, words):
    with pytest.raises(go.ModelError, match=re.escape(words)):
        go.simulate(_ball(), (0.0, 1.0), [0.0, 1.0], [0.0, 0.0], contact_options=options)
    assert ContactOptions.from_mapping({"max_impacts": 5}).max_impacts == 5


def test_every_phase_of_a_contact_run_keeps_the_options():
    """A bouncing ball with max_step: every phase steps within it (the options reach the
    phases as they are; an impact repeats its time, a zero step)."""
    tr = go.simulate(_ball(), (0.0, 1.5), [0.0, 1.0], [0.0, 0.0], max_step=0.01,
                     contact_options={"max_impacts": 3})
    assert len(tr.impacts) >= 1 and tr.stats["phases"] >= 2
    assert np.diff(tr.t).max() <= 0.01 * (1 + 1e-12)
    # the first impact at t = sqrt(2 h / g) exactly (event located to rounding)
    assert tr.impacts[0].t == pytest.approx(math.sqrt(2.0 / G), rel=1e-9)


def test_the_trajectory_as_a_table(tmp_path):
    pend = _pendulum()
    tr = go.simulate(pend, (0.0, 0.5), [L, 0.0], [0.0, 0.0], t_eval=np.linspace(0, 0.5, 11))
    cols = tr.columns()
    assert list(cols)[:5] == ["t", "q.x", "q.y", "v.x", "v.y"]
    assert {"a.x", "Qc.y", "lam.0", "energy", "position_residual", "rank"} <= set(cols)
    path = tr.to_csv(tmp_path / "pendulum.csv")
    header, *rows = path.read_text().splitlines()
    assert header.split(",") == list(cols) and len(rows) == len(tr)
    back = np.array([[float(x) for x in r.split(",")] for r in rows])
    np.testing.assert_array_equal(back[:, 1], tr.q[:, 0])            # full precision
    pd = pytest.importorskip("pandas")
    df = tr.to_dataframe()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == list(cols)
    np.testing.assert_array_equal(df["v.y"].to_numpy(), tr.v[:, 1])
    assert df.index.name == "t"


def test_to_dataframe_without_pandas_says_so(monkeypatch):
    tr = go.simulate(_pendulum(), (0.0, 0.1), [L, 0.0], [0.0, 0.0])
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="needs pandas"):
        tr.to_dataframe()


def test_the_house_rules_hold_in_the_library():
    """Options in one form: no ``dict(locals())``, no defaults read back from a signature,
    no status numbers written as literals where the table of codes names them."""
    src = {p: p.read_text() for p in (ROOT / "gaussopt").rglob("*.py")}
    assert [p for p, s in src.items() if "dict(locals())" in s] == []
    assert [p for p, s in src.items() if re.search(r"signature\(simulate\)", s)] == []
    assert [p for p, s in src.items() if "_PHASE_DEFAULTS" in s] == []
    assert [p for p, s in src.items() if re.search(r"I_SOLVER\] = 2\b", s)] == []


@pytest.mark.parametrize("kw, words", [
    (dict(friction="0.3"), "`friction` must be None, a number >= 0"),
    (dict(friction=True), "`friction` must be None, a number >= 0"),
    (dict(friction=-0.1), "`friction` must be None, a number >= 0"),
    (dict(restitution="0.5"), "`restitution` must be a number in [0, 1]"),
    (dict(restitution=True), "`restitution` must be a number in [0, 1]"),
    (dict(restitution=1.5), "`restitution` must lie in [0, 1]"),
])
def test_contact_arguments_are_checked_by_type(kw, words):
    with pytest.raises(go.ModelError, match=re.escape(words)):
        go.Contact(lambda t, q: np.array([q[1]]), slip=lambda t, q: np.array([q[0]]), **kw)
