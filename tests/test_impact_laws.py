"""The two impact laws of a contact run (``contact_options={"impact_law": ...}``) on a
Newton's cradle: three equal balls on a line, balls 2 and 3 touching at rest, ball 1
arriving at ``v0``.

References, written here:

* ``"newton"`` (the default): the generalized Newton law at both contacts at once. With
  impulses ``P1`` (balls 1-2) and ``P2`` (2-3), unit masses: ``v1 = v0 - P1``,
  ``v2 = P1 - P2``, ``v3 = P2``; Newton's law ``v2 - v1 >= e v0`` and ``v3 - v2 >= 0``, both
  active for ``e = 1``: ``P1 = 4 v0 / 3``, ``P2 = 2 v0 / 3``, so ``v+ = (-1, 2, 2) v0 / 3``
  (energy and momentum conserved; the textbook answer of rigid bodies).
* ``"sequential"``: binary impacts, the fastest approach first. For equal masses a binary
  impact with restitution ``e`` gives ``(va, vb) -> ((1 - e) va + (1 + e) vb, (1 + e) va +
  (1 - e) vb) / 2``; with ``e = 1`` the chain passes ``v0`` on: ``v+ = (0, 0, v0)`` (the
  cradle's observed motion). With ``e < 1`` the loop written here runs the series to its
  limit; the run stops it when no contact approaches faster than its velocity tolerance
  ``vel_tol = 1e3 (atol + rtol (1 + max|v|)) |G_i|`` (``|G_i| = sqrt 2``), so the
  velocities after the impact differ from the limit by a few ``vel_tol`` (the factor
  ``(1 + e)/2 < 1`` per binary impact makes the remaining series at most ``2 vel_tol``
  per contact); 10 ``vel_tol`` bounds it.

Between the impacts the balls fly freely (no force), so the states are linear in time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gaussopt as go
from gaussopt.core.exceptions import ModelError

TOL = dict(rtol=1e-12, atol=1e-12)
R, V0, D = 0.1, 1.0, 0.5          # ball radius, speed of ball 1, its distance to ball 2


def cradle(e):
    gaps = go.Contact(lambda t, q: np.array([q[1] - q[0] - 2 * R, q[2] - q[1] - 2 * R]),
                      restitution=e, rheonomic=False, name="gaps")
    return go.System(("x1", "x2", "x3"), mass=np.eye(3), constraints=[gaps])


def run(e, law):
    q0 = [-D - 2 * R, 0.0, 2 * R]
    return go.simulate(cradle(e), (0.0, 1.0), q0, [V0, 0.0, 0.0], **TOL,
                       contact_options={"impact_law": law})


def binary_limit(e, v):
    """The sequential law's limit, written here: binary impacts of equal masses, the
    fastest approach first, until nothing approaches (to rounding)."""
    v = list(v)
    for _ in range(100000):
        rates = [v[1] - v[0], v[2] - v[1]]
        i = int(np.argmin(rates))
        if rates[i] >= -1e-15:
            return np.array(v)
        a, b = v[i], v[i + 1]
        v[i], v[i + 1] = ((1 - e) * a + (1 + e) * b) / 2, ((1 + e) * a + (1 - e) * b) / 2
    raise AssertionError("the series did not converge")


def test_newton_law_moves_the_last_two_balls_together():
    tr = run(1.0, "newton")
    assert tr.success, tr.message
    (im,) = tr.impacts
    assert im.t == pytest.approx(D / V0, rel=1e-12)
    np.testing.assert_allclose(tr.v[-1], np.array([-1.0, 2.0, 2.0]) * V0 / 3, rtol=0,
                               atol=1e-12)
    np.testing.assert_allclose(im.impulses, [4 * V0 / 3, 2 * V0 / 3], rtol=1e-12)


def test_sequential_law_passes_the_impact_down_the_chain():
    tr = run(1.0, "sequential")
    assert tr.success, tr.message
    (im,) = tr.impacts
    assert im.t == pytest.approx(D / V0, rel=1e-12)
    np.testing.assert_allclose(tr.v[-1], [0.0, 0.0, V0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(im.impulses, [V0, V0], rtol=1e-12)
    assert im.kinetic_after == pytest.approx(im.kinetic_before, rel=1e-12)
    # after it, ball 3 flies off at v0 and the others stay where they met
    t_imp = D / V0
    np.testing.assert_allclose(tr.q[-1], [-2 * R, 0.0, 2 * R + V0 * (1.0 - t_imp)], rtol=0,
                               atol=1e-10)


@pytest.mark.parametrize("e", [0.0, 0.5, 0.9])
def test_sequential_law_with_losses_follows_the_binary_series(e):
    tr = run(e, "sequential")
    assert tr.success, tr.message
    im = tr.impacts[0]
    v_after = tr.v[np.searchsorted(tr.t, im.t, side="right")]
    want = binary_limit(e, [V0, 0.0, 0.0])
    vel_tol = 1e3 * (TOL["atol"] + TOL["rtol"] * (1 + V0)) * math.sqrt(2)
    np.testing.assert_allclose(v_after, want, rtol=0, atol=10 * vel_tol)
    assert v_after.sum() == pytest.approx(V0, rel=1e-12)            # momentum
    assert im.kinetic_after <= im.kinetic_before


def test_impact_law_is_checked():
    with pytest.raises(ModelError, match=r"impact_law.*must be one of \['newton', "
                                         r"'sequential'\], found 'binary'"):
        go.simulate(cradle(1.0), (0.0, 1.0), [-D - 2 * R, 0.0, 2 * R], [V0, 0.0, 0.0],
                    contact_options={"impact_law": "binary"})
