"""Pickling of systems: every front end and every problem, round trips give the same steps."""

from __future__ import annotations

import importlib
import os
import pickle
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt.model.system import rebuildable

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = sorted(m.name for m in pkgutil.iter_modules(
    [str(ROOT / "problems")]) if not m.name.startswith("_"))
EXACT = ("closed_form", "lagrange")


def _steps(system, q, v, t=0.0, solvers=EXACT):
    """The step of every exact solver at one state: (a, multipliers) each."""
    out = []
    for s in solvers:
        r = go.solve_step(system, t, q, v, solver=s)
        out.append((r.a, r.multipliers, r.constraint_force))
    return out


def _assert_same_steps(s1, s2, q, v, t=0.0):
    if s1.contacts:
        # a system with contacts has no single step (its contact state is decided along a
        # run): the same short run, bitwise, from its (consistent) initial state
        assert len(s1.contacts) == len(s2.contacts)
        r1, r2 = (go.simulate(s, (t, t + 0.05), q, v) for s in (s1, s2))
        assert r1.success and np.array_equal(r1.q, r2.q) and np.array_equal(r1.v, r2.v)
        return
    for (a1, l1, f1), (a2, l2, f2) in zip(_steps(s1, q, v, t), _steps(s2, q, v, t)):
        assert np.array_equal(a1, a2) and np.array_equal(l1, l2) and np.array_equal(f1, f2)


def _moving_state(pb):
    """The problem's initial state and, when it starts at rest, a state with velocities
    (so velocity-dependent terms take part): the same positions, v = v0 + 0.3 (a system
    with contacts starts from its own, consistent, state)."""
    if pb.system.contacts:
        return pb.q0, pb.v0
    return pb.q0, (pb.v0 if np.any(pb.v0) else pb.v0 + 0.3)


# ----------------------------------------------------------------------------- problems
@pytest.mark.parametrize("name", PROBLEMS)
def test_problem_system_round_trip(name):
    pb = importlib.import_module(f"gaussopt_problems.{name}").build()
    blob = pickle.dumps(pb.system)
    s2 = pickle.loads(blob)
    assert type(s2) is type(pb.system) and s2.name == pb.system.name
    assert s2.coordinates == pb.system.coordinates
    assert (s2.compiled is None) == (pb.system.compiled is None)
    _assert_same_steps(pb.system, s2, *_moving_state(pb))
    # a second round trip of the unpickled system gives the same bytes' worth of system
    _assert_same_steps(s2, pickle.loads(pickle.dumps(s2)), *_moving_state(pb))


def test_problem_parameters_survive_pickling():
    """The parameters travel with the pickle (not the defaults of the builder)."""
    from gaussopt_problems import four_bar

    s = four_bar.build(psi=123.0, m=7.0).system
    s2 = pickle.loads(pickle.dumps(s))
    q, v = np.array([0.4, 0.4, np.pi - 0.4]), np.array([1.0, 1.0, -1.0])
    _assert_same_steps(s, s2, q, v)
    default = four_bar.build().system
    assert not np.array_equal(go.solve_step(default, 0.0, q, v).a, go.solve_step(s2, 0.0, q, v).a)


def test_handwritten_closures_pickle_through_their_builder():
    from gaussopt_problems import four_bar

    s = four_bar.system_handwritten(psi=300.0, extra_force=np.array([1.0, -2.0, 0.0]))
    s2 = pickle.loads(pickle.dumps(s))
    q, v = np.array([0.4, 0.4, np.pi - 0.4]), np.array([1.0, 1.0, -1.0])
    _assert_same_steps(s, s2, q, v)


# ----------------------------------------------------------------------------- front ends
def test_from_lagrangian_round_trip():
    import sympy as sp
    from sympy.physics.mechanics import dynamicsymbols

    x, y = dynamicsymbols("x y")
    t = dynamicsymbols._t
    m, l, g, c = sp.symbols("m l g c", positive=True)
    s = go.from_lagrangian([x, y], T=m / 2 * (x.diff(t)**2 + y.diff(t)**2), V=m * g * y,
                           forces=[-c * x.diff(t), 0], holonomic=[x**2 + y**2 - l**2],
                           params={m: 2.0, l: 1.5, g: 9.81, c: 0.3}, name="damped")
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.name == "damped" and s2.compiled is not None
    _assert_same_steps(s, s2, np.array([0.9, -1.2]), np.array([0.8, 0.6]))


def test_from_mechanics_round_trip():
    import sympy as sp
    from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols

    x, y = dynamicsymbols("x y")
    m, k = sp.symbols("m k", positive=True)
    L = m / 2 * (x.diff()**2 + y.diff()**2) - k / 2 * (x**2 + y**2)
    lm = LagrangesMethod(L, [x, y], hol_coneqs=[x - 2 * y])
    s = go.from_mechanics(lm, {m: 2.0, k: 8.0})
    s2 = pickle.loads(pickle.dumps(s))
    _assert_same_steps(s, s2, np.array([0.4, 0.2]), np.array([0.2, 0.1]))


def test_multibody_round_trip_and_model_pickle():
    import gaussopt.multibody as mb

    r, L = 0.3, 0.8
    crank = mb.Body.uniform_rod("crank", 1.5, r)
    rod = mb.Body.uniform_rod("rod", 2.0, L)
    slider = mb.Body("slider", 0.7, 0.004)
    model = mb.Model(
        [crank, rod, slider],
        [mb.Revolute(None, (0.0, 0.0), crank, (-r / 2, 0.0)),
         mb.Revolute(crank, (r / 2, 0.0), rod, (-L / 2, 0.0)),
         mb.Revolute(rod, (L / 2, 0.0), slider, (0.0, 0.0)),
         mb.Prismatic(None, (0.0, 0.0), (1.0, 0.0), slider, (0.0, 0.0))],
        [mb.Torque(crank, 2.5), mb.Spring(None, (1.0, 0.5), slider, (0.0, 0.0), 30.0, 0.4)],
        gravity=(0.0, -9.81), name="slider_crank_spring")
    q0, v0 = model.initial_state({"crank.phi": 0.7}, {"crank.phi": 1.3})
    s2 = pickle.loads(pickle.dumps(model.system))
    assert s2.name == "slider_crank_spring" and s2.row_labels() == model.system.row_labels()
    _assert_same_steps(model.system, s2, q0, v0)
    m2 = pickle.loads(pickle.dumps(model))
    assert m2.labels == model.labels and np.array_equal(m2.mass_matrix, model.mass_matrix)


# ----------------------------------------------------------------------------- user systems
def _mass(t, q):
    return np.diag([2.0, 2.0])


def _force(t, q, v):
    return np.array([0.0, -2.0 * 9.81]) - 0.1 * v


def _phi(t, q):
    return np.array([q @ q - 1.0])


def test_user_system_of_module_level_functions_pickles():
    s = go.System(("x", "y"), mass=_mass, force=_force, constraints=[go.Holonomic(_phi)],
                  name="user")
    go.solve_step(s, 0.0, np.array([0.6, -0.8]), np.array([0.8, 0.6]))   # fills its caches
    s2 = pickle.loads(pickle.dumps(s))
    _assert_same_steps(s, s2, np.array([0.6, -0.8]), np.array([0.8, 0.6]))


def test_user_system_with_a_lambda_does_not_pickle():
    s = go.System(("x", "y"), mass=np.eye(2),
                  constraints=[go.Holonomic(lambda t, q: np.array([q @ q - 1.0]))])
    with pytest.raises((pickle.PicklingError, AttributeError), match="lambda"):
        pickle.dumps(s)


@rebuildable
def spring_pendulum(k=40.0, l=1.2):
    """A module-level builder whose System is made of closures."""
    return go.System(("x", "y"), mass=np.eye(2),
                     force=lambda t, q, v: np.array([0.0, -9.81]) - k * (np.hypot(*q) - l) * q,
                     constraints=[go.Nonholonomic(lambda t, q, v: np.array([v[0] - 0.1 * v[1]]))],
                     name="spring_pendulum")


def test_rebuildable_builder_of_closures_pickles():
    s = spring_pendulum(k=25.0)
    s2 = pickle.loads(pickle.dumps(s))
    _assert_same_steps(s, s2, np.array([0.3, -1.0]), np.array([0.1, 1.0]))
    assert not np.array_equal(go.solve_step(spring_pendulum(), 0.0, [0.3, -1.0], [0.1, 1.0]).a,
                              go.solve_step(s2, 0.0, [0.3, -1.0], [0.1, 1.0]).a)


def test_rebuilt_by_rejects_a_non_callable():
    s = go.System(("x",), mass=[[1.0]])
    with pytest.raises(go.ModelError, match="`builder` must be callable"):
        s.rebuilt_by("gaussopt_problems.four_bar")


# ----------------------------------------------------------------------------- other process
_CHILD = r"""
import pickle, sys
import numpy as np
import gaussopt as go
cases = pickle.load(sys.stdin.buffer)
out = []
for system, q, v in cases:
    out.append([(r.a, r.multipliers) for r in
                (go.solve_step(system, 0.0, q, v, solver=s) for s in ("closed_form", "lagrange"))])
pickle.dump(out, sys.stdout.buffer)
"""


@pytest.mark.slow
def test_round_trip_in_another_process():
    """Systems unpickled in a fresh interpreter (generated code regenerated there, the
    numba modules found in the cache) give the same steps as here."""
    cases = []
    for name in PROBLEMS:
        pb = importlib.import_module(f"gaussopt_problems.{name}").build()
        if pb.system.contacts:      # no single step (test_problem_system_round_trip runs them)
            continue
        cases.append((pb.system, *_moving_state(pb)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-c", _CHILD], input=pickle.dumps(cases),
                         capture_output=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    there = pickle.loads(res.stdout)
    for (system, q, v), theirs in zip(cases, there):
        here = [(r.a, r.multipliers) for r in
                (go.solve_step(system, 0.0, q, v, solver=s) for s in EXACT)]
        for (a1, l1), (a2, l2) in zip(here, theirs):
            assert np.array_equal(a1, a2) and np.array_equal(l1, l2), system.name


@pytest.mark.parametrize("form", ["new", "vakonomic"])
def test_second_order_particle_forms_round_trip(form):
    from gaussopt_problems import second_order_particle as sop

    pb = sop.build(form=form, m=2.0)
    s2 = pickle.loads(pickle.dumps(pb.system))
    assert s2.coordinates == pb.system.coordinates
    _assert_same_steps(pb.system, s2, pb.q0, pb.v0)
