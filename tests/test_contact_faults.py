"""Contact runs keep what they computed: Ctrl-C, faults of the model's functions, bad input.

A contact run is a sequence of smooth phases joined by the contact decisions at impacts,
closings and lift-offs. It has one interrupt guard for the whole run, so a Ctrl-C that
arrives during a phase, between two phases or while the phases are joined stops the run
with ``success=False`` and the phases computed so far, and a second one while the result is
assembled is deferred, never raised. The interrupts here are sent from inside the run (from
the model's own functions, or from a phase's end), so the tests do not depend on timing:
a busy machine changes when they are sent in wall time, not where in the run.
"""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.exceptions import ModelError
from gaussopt.integrate import contact_run, ivp

M, R, G = 0.7, 0.1, 9.81
Q0, V0 = [0.0, 1.3], [0.3, 0.0]
#: the first impact of the ball dropped from 1.3 m with r = 0.1 m: sqrt(2 * 1.2 / 9.81)
T1 = float(np.sqrt(2 * (Q0[1] - R) / G))

needs_signals = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")


def ball(gap=None, e: float = 1.0, **kw) -> go.System:
    """The elastic ball on the floor (a new impact every 2 T1: a run of many phases)."""
    floor = go.Contact(gap or (lambda t, q: np.array([q[1] - R])), restitution=e,
                       rheonomic=False, name="floor", **kw)
    return go.System(("x", "y"), mass=M * np.eye(2), force=[0.0, -M * G], constraints=[floor],
                     energy=lambda t, q, v: 0.5 * M * v @ v + M * G * q[1])


def kept_phases_are_proper(tr) -> None:
    """What an interrupted or failed run keeps is a proper run: finite, on the floor or
    above it, with the energy of the elastic ball (the phases' accuracy: rtol 1e-3 of the
    default tolerances over a few bounces, far above rounding)."""
    assert len(tr) > 2 and np.all(np.isfinite(tr.q)) and np.all(np.isfinite(tr.v))
    assert np.all(np.diff(tr.t) >= 0)
    assert tr.q[:, 1].min() > R - 1e-6
    e = 0.5 * M * (tr.v ** 2).sum(axis=1) + M * G * tr.q[:, 1]
    assert np.ptp(e) <= 1e-3 * abs(e[0])


# --------------------------------------------------------------------------- Ctrl-C
@needs_signals
def test_ctrl_c_in_a_phase_stops_the_contact_run():
    # sent from the gap function (which the run calls in every phase, as an event, and
    # between phases) once the ball has bounced three times: every trial the same
    sent = []

    def gap(t, q):
        if np.real(t) > 6 * T1 and not sent:
            sent.append(float(np.real(t)))
            os.kill(os.getpid(), signal.SIGINT)
        return np.array([q[1] - R])

    tr = go.simulate(ball(gap), (0.0, 200.0), Q0, V0)
    assert sent and not tr.success
    assert tr.message.startswith("Interrupted (KeyboardInterrupt) at t=")
    assert isinstance(tr.exception, KeyboardInterrupt)
    # (the gap is evaluated at the end of each step, as the phase's event: the run stops
    # at the step where the interrupt arrived, or keeps the steps before it)
    assert 5 * T1 * (1 - 1e-12) <= tr.t[-1] < 200.0 and len(tr.impacts) >= 2
    kept_phases_are_proper(tr)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # (restored)


def _run_with(monkeypatch, phase_hook, join_hook=None):
    """``go.simulate`` of the elastic ball over 200 s with ``phase_hook(tr)`` called after
    each phase and ``join_hook()`` before the phases are joined."""
    real_run = ivp.simulate_contacts

    def simulate_contacts(*a, phase, **k):
        def hooked(*pa, **pk):
            tr = phase(*pa, **pk)
            phase_hook(tr)
            return tr
        return real_run(*a, phase=hooked, **k)
    monkeypatch.setattr(ivp, "simulate_contacts", simulate_contacts)
    if join_hook is not None:
        real_join = contact_run._join

        def join(*a, **k):
            join_hook()
            return real_join(*a, **k)
        monkeypatch.setattr(contact_run, "_join", join)
    return go.simulate(ball(), (0.0, 200.0), Q0, V0)


@needs_signals
def test_ctrl_c_between_two_phases_stops_before_the_next(monkeypatch):
    # a Ctrl-C after a phase has ended (while its result is assembled, or while the
    # contact problem of the impact is solved) used to be deferred by that phase's own
    # guard and never raised again: the run went on to its end
    done = []

    def hook(tr):
        done.append(tr.t[-1])
        if len(done) == 3:
            os.kill(os.getpid(), signal.SIGINT)

    tr = _run_with(monkeypatch, hook)
    assert len(done) == 3 and not tr.success and isinstance(tr.exception, KeyboardInterrupt)
    assert tr.t[-1] == done[-1] and len(tr.impacts) == 2
    assert tr.message == f"Interrupted (KeyboardInterrupt) at t={done[-1]}."
    kept_phases_are_proper(tr)


@needs_signals
def test_second_ctrl_c_while_the_phases_are_joined_is_deferred(monkeypatch):
    done, joins = [], []

    def hook(tr):
        done.append(tr.t[-1])
        if len(done) == 2:
            os.kill(os.getpid(), signal.SIGINT)

    def join_hook():
        joins.append(1)
        os.kill(os.getpid(), signal.SIGINT)      # the second Ctrl-C: not raised

    tr = _run_with(monkeypatch, hook, join_hook)
    assert joins and not tr.success and isinstance(tr.exception, KeyboardInterrupt)
    assert tr.meta["deferred_interrupts"] >= 1
    assert tr.t[-1] == done[-1]
    kept_phases_are_proper(tr)


def test_progress_is_called_during_a_contact_run():
    seen = []
    tr = go.simulate(ball(), (0.0, 8 * T1), Q0, V0, progress=lambda t: seen.append(t))
    assert tr.success and len(tr.impacts) == 4
    # at every accepted step of every phase, in order, and never twice at the same time
    # within a phase; the last call at the end of the run
    assert len(seen) >= tr.stats["steps"] - tr.stats["phases"]
    assert np.all(np.diff(seen) >= 0) and seen[-1] == pytest.approx(8 * T1, rel=1e-12)


def test_a_progress_callback_that_raises_stops_a_contact_run():
    # (a callback that saves, or stops the run by raising, acts during the run)
    class Enough(Exception):
        pass

    def progress(t):
        if t > 5 * T1:
            raise Enough("enough")

    tr = go.simulate(ball(), (0.0, 200.0), Q0, V0, progress=progress)
    assert not tr.success and isinstance(tr.exception, Enough)
    assert "progress" in tr.message and 5 * T1 < tr.t[-1] < 6 * T1
    kept_phases_are_proper(tr)


# --------------------------------------------------------------------------- faults
def test_a_jacobian_that_turns_nan_mid_run_keeps_the_run():
    def jac(t, q):
        if q[1] < 0.5 * (Q0[1] + R) and t > 3 * T1:       # in the third flight
            return np.array([[0.0, np.nan]])
        return np.array([[0.0, 1.0]])

    tr = go.simulate(ball(jacobian=jac, gamma=lambda t, q, v: np.zeros(1)), (0.0, 200.0), Q0, V0)
    assert not tr.success and tr.exception is not None
    assert "floor" in tr.message and ("NaN" in tr.message or "nan" in tr.message)
    assert "events[" not in tr.message            # (the user passed no events)
    # (at the third impact, 5 T1, the contact decision asks for the Jacobian first)
    assert tr.t[-1] == pytest.approx(5 * T1, rel=1e-9)
    kept_phases_are_proper(tr)


def test_a_gap_whose_row_count_changes_mid_run_is_named():
    def gap(t, q):
        return np.array([q[1] - R] * (1 if np.real(t) < 3 * T1 else 2))

    tr = go.simulate(ball(gap), (0.0, 200.0), Q0, V0)
    assert not tr.success and isinstance(tr.exception, ModelError)
    assert "floor" in tr.message and "expected 1" in tr.message
    # (the step in which the gap could not be evaluated is not kept: it may have crossed
    # the floor)
    assert 0.0 < tr.t[-1] < 3 * T1
    kept_phases_are_proper(tr)


@pytest.mark.parametrize("bad,match", [
    (lambda t, q: None, "floor"),
    (lambda t, q: "0.1", "floor"),
    (lambda t, q: np.array([np.nan]), "not finite"),
])
def test_a_gap_that_returns_no_number_is_refused_before_the_run(bad, match):
    with pytest.raises(ModelError, match=match):
        go.simulate(ball(bad), (0.0, 1.0), Q0, V0)


@pytest.mark.parametrize("opts,match", [
    ({"zeno_height": 0.0}, "zeno_height"), ({"zeno_height": -1e-6}, "zeno_height"),
    ({"zeno_height": float("nan")}, "zeno_height"), ({"zeno_heigth": 1e-6}, "did you mean"),
    ({"max_impacts": 2.5}, "max_impacts"),
])
def test_contact_options_are_checked_before_the_run(opts, match):
    with pytest.raises(ModelError, match=match):
        go.simulate(ball(), (0.0, 1.0), Q0, V0, contact_options=opts)


@pytest.mark.parametrize("kw", [{"friction": "0.3"}, {"friction": True},
                                {"restitution": "1"}, {"friction": -0.1}])
def test_contact_coefficients_are_checked(kw):
    with pytest.raises(ModelError):
        ball(**kw) if "restitution" not in kw else go.Contact(
            lambda t, q: np.array([q[1] - R]), **kw)
