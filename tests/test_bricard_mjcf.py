"""The IFToMM A04 Bricard mechanism written in MJCF (tests/data/bricard.xml: a hinge chain
ground-rod1-...-rod5, the loop closed by two ``connect`` equalities on joint 6's axis),
loaded through :func:`gaussopt.multibody.load`, against problems/bricard.py's
independent joint-angle reference.

The file is the problem's mechanism up to one deliberate difference: MuJoCo rejects a
zero moment of inertia, so the rods' axial moment is 1e-12 kg m^2 instead of the
slender rod's 0. Its effect on any acceleration is at most ~1e-12 / (m L^2 / 12) =
1.2e-11 relative (the rods' axial spin is fixed by the joints; it carries at most that
share of the generalized inertia). Two ``connect`` (spherical) joints at P5 and
P5 + (1, 0, 0) leave exactly joint 6's rotation about x free: the same motion as the
problem's revolute.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gaussopt as go
from gaussopt_problems import bricard

mj = pytest.importorskip("mujoco")
import gaussopt.multibody.io.mjcf as mjcf  # noqa: E402

PATH = Path(__file__).parent / "data" / "bricard.xml"
AXIAL = 1e-12            # the rods' axial moment in the file [kg m^2]
REL_INERTIA = AXIAL / (1.0 / 12.0)      # its share of a rod's inertia: 1.2e-11


@pytest.fixture(scope="module")
def loaded():
    # the equalities' solref/solimp are listed unmapped (gaussopt holds them exactly)
    with pytest.warns(mjcf.UnmappedFeatureWarning, match="solref"):
        return go.multibody.load(PATH, coordinates="maximal")


def test_bricard_mjcf_rank_report(loaded):
    """5 rods (35 coordinates); 5 norms + 5 hinges x 5 + 2 connects x 3 = 36 equations:
    Gruebler-Kutzbach 6 * 5 - 31 = -1, true mobility 1, so two redundant rows (the
    loop's own, as in the problem, and the distance of the two anchors along joint 6's
    axis, fixed by both connects)."""
    rr = loaded.rank_report()
    assert (loaded.n, loaded.m) == (35, 36)
    assert rr.gruebler == -1 and rr.rank == 34 and rr.dof == 1
    assert len(rr.redundant) == 2
    assert all(r.startswith("Spherical(ground,rod5)") for r in rr.redundant)


def test_bricard_mjcf_pose_is_the_problems(loaded):
    """The loader's bodies are MuJoCo's inertial frames at qpos0: the rods' centroids with
    the world's axes (diaginertia without a quat), i.e. the problem's q0 exactly, so the
    problem's outputs (P2 from rod 2's pose) apply to the loaded model's coordinates."""
    pb = bricard.build()
    assert np.abs(np.asarray(loaded.q_reference) - pb.q0).max() < 1e-15


def test_bricard_mjcf_steps_equal_the_reference(loaded):
    """At consistent states of the reference's motion (t = 0, 0.5, 1 s), the loaded
    model's accelerations equal the joint-angle model's. Error estimate: rounding,
    ~|a| eps cond ~ 1e-14 (tests/test_spatial_refs_b.py measured <= 5e-14 on the
    problem's own model), plus the axial-inertia difference <= REL_INERTIA |a| ~ 1.2e-11
    |a|, |a| <= ~10: bound 1e-9."""
    ref = bricard.reference_solution(1.0)
    for t in (0.0, 0.5, 1.0):
        th, u = ref.states([t])
        th1, u1 = ref._sol.sol(t)
        du = ref.acceleration(th1, u1)
        q, v, a = ref.body_coordinates(ref.close(th1, th[0]), u1, du)
        assert np.abs(loaded.phi(t, q)).max() < 1e-14
        step = go.solve_step(loaded.system, t, q, v)
        assert np.abs(step.a - a).max() < 1e-9 and np.abs(a).max() < 20.0   # measured
        # <= 1.2e-12 (|a| <= 2.0: the axial-inertia term, rounding below it)


def test_bricard_mjcf_follows_the_reference(loaded):
    """1 s from rest at rtol = atol = 1e-12 (as tests/test_spatial_refs_b.py runs the
    problem's own model): DOP853's global error a few rtol per unit time on coordinates
    of size 1 (measured 1.1e-12 over 10 s for the problem's model), the reference's
    ~1e-12, the axial inertia's ~REL_INERTIA x 1 m ~ 1e-11 m: bound 1e-9 m for P2."""
    pb = bricard.build(t_end=1.0)
    traj = go.simulate(loaded.system, pb.t_span, np.asarray(loaded.q_reference, float),
                       pb.v0, rtol=1e-12, atol=1e-12)
    assert traj.success, traj.message
    out, ref = pb.outputs(traj.q, traj.v), pb.reference(traj.t)
    err = max(float(np.abs(out[k] - ref[k]).max()) for k in ("P2_x", "P2_y", "P2_z"))
    assert err < 1e-9                         # measured 4.3e-13
    assert np.ptp(ref["P2_y"]) > 0.05         # the linkage moved (P2_y spans 0.11 m in 1 s)
