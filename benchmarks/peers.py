"""Peers of gaussopt, measured in the same process, each with its accuracy checked.

Run: ``python3 benchmarks/peers.py [--repeat N] [--quick]``. Pinocchio and MuJoCo
are optional extras (``pip install ".[bench]"``); they are imported inside the
functions, so this module imports without them. Every function returns a dict
of times and accuracies so that another benchmark can print gaussopt and its
peer side by side. Timings are medians over ``timeit.repeat`` with one BLAS
thread (``threadpoolctl``).

The models
----------
Paper 001's parallelogram four-bar as a real mechanism: three uniform rods
(``m = 12 kg``, ``l = 2 m``, centroidal ``I = m l^2/12 = 4 kg m^2``) in the
vertical plane, gravity ``g = 9.8`` along ``-y``, a torque ``psi = 450 N m`` on
the crank; crank pinned at the origin (angle ``th1`` from ``+x``), rocker
pinned at ``(l, 0)`` (angle ``th2``), a coupler of length ``l`` joining the
crank tip and the rocker tip. Joint coordinates ``(th1, phi, th2)`` where
``phi`` is the coupler's angle *relative to the crank*: on the physical branch
``th2 = th1``, ``phi = -th1`` (the coupler translates) and
``(5/3) m l^2 th1'' = psi - 2 m g l cos th1`` — :func:`gaussopt_problems.four_bar.reference`.
Its singular positions are the collinear ones ``th1 = k pi``: there the
horizontal row of the loop closure vanishes and any drift makes that row
inconsistent, so its multiplier is unbounded (the crank revolves: 20 s pass
``th1 = k pi`` about 360 times).

* **Pinocchio** (:func:`pinocchio_four_bar`, :func:`pinocchio_rk4`): a
  kinematic tree ground -> crank (``JointModelRZ``) -> coupler (``RZ`` at the
  crank tip), ground -> rocker (``RZ`` at ``(l, 0)``), and a ``CONTACT_3D``
  ``RigidConstraintModel`` between the coupler's far end and the rocker tip.
  Its z row is identically zero (a planar mechanism), so
  ``constraintDynamics`` without ``ProximalSettings`` returns NaN silently;
  ``ProximalSettings(1e-12, 1e-12, mu=1e-12, 10)`` fixes that (3 proximal
  iterations) and gives the reduced model's ``th1''`` to ~1e-16.
  ``forwardDynamics`` is given the two planar rows of the frame Jacobians
  (``LOCAL_WORLD_ALIGNED``) and the drift ``J' v`` (the classical acceleration
  of the two points at ``a = 0``; pinocchio solves ``J a = -drift``).
* **MuJoCo** (:func:`mujoco_four_bar`): the same bodies in MJCF (hinges about
  ``z``, ``gravity="0 -9.8 0"``, so ``qpos = (th1, phi, th2)`` with the same
  meaning), explicit ``<inertial>`` (``diaginertia = 1e-6, I, I``), an equality
  ``connect`` (anchor at the coupler's far end, consistent at ``qpos0 = 0``),
  a ``motor`` on the crank with ``ctrl = 450``. MuJoCo's equality constraints
  are soft (default ``solref = 0.02 1``, ``solimp = 0.9 0.95 0.001``): its
  constraint force is only a fraction ``d ~ 0.9..0.95`` of the rigid one
  (``th1''`` at the start 3.9 % off) and the constraint damps the motion.
* **scipy.sparse.linalg.splu** (:func:`splu_n_four_bar`): the KKT matrix
  ``[[M, A^T], [A, 0]]`` of :mod:`gaussopt_problems.n_four_bar` (body coordinates) at
  its initial state, assembled as CSC once; factor and solve per step.
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gaussopt_problems import four_bar, n_four_bar  # noqa: E402

M_ROD, L_ROD, G, PSI = 12.0, 2.0, four_bar.G, 450.0
TH0 = np.pi / 3
DEVIATION = 0.1  # rad: "left the reference" threshold


def _blas1():
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def median_us(fn, repeat: int = 7, number: int = 1000) -> float:
    """Median microseconds per call of ``fn`` over ``repeat`` batches of ``number`` calls."""
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return float(np.median(times)) / number * 1e6


def reduced_acceleration(th1: float, psi: float = PSI, m: float = M_ROD, l: float = L_ROD,
                         g: float = G) -> float:
    """``th1''`` of the reduced parallelogram model, ``(psi - 2 m g l cos th1) / (5/3 m l^2)``."""
    return (psi - 2 * m * g * l * np.cos(th1)) / (5.0 / 3.0 * m * l * l)


def joint_state(th1: float = TH0, w: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Joint coordinates ``(th1, phi, th2)`` and rates on the parallelogram branch."""
    return np.array([th1, -th1, th1]), np.array([w, -w, w])


def _trajectory_report(t: np.ndarray, Q: np.ndarray, l: float = L_ROD, psi: float = PSI,
                       m: float = M_ROD, g: float = G) -> dict:
    """Accuracy of a joint-space trajectory ``Q`` (rows ``(th1, phi, th2)``) at times ``t``:
    ``th1`` against the reduced ODE, loop closure, and the branch (coupler angle, th2 - th1)."""
    th1, phi, th2 = Q[:, 0], Q[:, 1], Q[:, 2]
    ref = four_bar.reference(t, psi=psi, m=m, l=l, g=g, th0=TH0)[0]
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(th1 - ref)
        tip_c = l * np.stack([np.cos(th1) + np.cos(th1 + phi), np.sin(th1) + np.sin(th1 + phi)])
        tip_r = np.stack([l + l * np.cos(th2), l * np.sin(th2)])
        closure = np.linalg.norm(tip_c - tip_r, axis=0)
        coupler = np.abs(np.angle(np.exp(1j * (th1 + phi))))  # 0 on the parallelogram branch
        bad = ~(err <= DEVIATION)
        finite = np.all(np.isfinite(Q), axis=1)
    i_dev, i_nan = int(np.argmax(bad)), int(np.argmin(finite))
    fin = finite
    return {
        "th1_end": float(th1[-1]), "th1_ref_end": float(ref[-1]),
        "err_end": float(err[-1]),
        "err_max": float(np.max(err[fin])) if fin.all() else float("inf"),
        "err_max_finite": float(np.max(err[fin])) if fin.any() else float("nan"),
        "t_deviate": float(t[i_dev]) if bad[i_dev] else None,
        "t_nan": None if finite.all() else float(t[i_nan]),
        "closure_max": float(np.max(closure[fin])) if fin.any() else float("nan"),
        "closure_end": float(closure[-1]),
        "coupler_angle_max": float(np.max(coupler[fin])) if fin.any() else float("nan"),
    }


# ----------------------------------------------------------------------------- Pinocchio


def pinocchio_model(m: float = M_ROD, l: float = L_ROD, g: float = G,
                    reference_frame: str = "LOCAL", baumgarte: Optional[tuple] = None):
    """Pinocchio model, data, loop-closure constraint (models, datas) and joint ids.

    Returns ``(model, data, cmodels, cdatas, ids)``, ``ids = (crank, coupler, rocker)``,
    joint coordinates ``q = (th1, phi, th2)``.
    """
    import pinocchio as pin

    model = pin.Model()
    model.gravity = pin.Motion(np.array([0.0, -g, 0.0]), np.zeros(3))
    inertia = pin.Inertia(m, np.array([l / 2, 0.0, 0.0]), np.diag([0.0, 1.0, 1.0]) * m * l * l / 12)
    at = pin.SE3(np.eye(3), np.array([l, 0.0, 0.0]))  # a rod's far end / the rocker's pin
    crank = model.addJoint(0, pin.JointModelRZ(), pin.SE3.Identity(), "crank")
    model.appendBodyToJoint(crank, inertia, pin.SE3.Identity())
    coupler = model.addJoint(crank, pin.JointModelRZ(), at, "coupler")
    model.appendBodyToJoint(coupler, inertia, pin.SE3.Identity())
    rocker = model.addJoint(0, pin.JointModelRZ(), at, "rocker")
    model.appendBodyToJoint(rocker, inertia, pin.SE3.Identity())
    rf = getattr(pin.ReferenceFrame, reference_frame)
    cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, model, coupler, at, rocker, at, rf)
    if baumgarte is not None:
        cm.setBaumgarteCorrectorParameters(pin.BaumgarteCorrectorParameters(*baumgarte))
    cmodels = pin.StdVec_RigidConstraintModel()
    cmodels.append(cm)
    cdatas = pin.StdVec_RigidConstraintData()
    cdatas.append(cm.createData())
    data = model.createData()
    pin.initConstraintDynamics(model, data, cmodels, cdatas)
    return model, data, cmodels, cdatas, (crank, coupler, rocker)


def pinocchio_four_bar(th1: float = TH0, w: float = 1.3, psi: float = PSI, mu: float = 1e-12,
                       max_iter: int = 10, repeat: int = 7, number: int = 5000) -> dict:
    """One Pinocchio step of the four-bar: accuracy against the reduced model and cost.

    Returns ``acc`` (joint accelerations from ``constraintDynamics``), ``acc_ref``
    (reduced ``th1''``), ``rel_err`` (crank), ``nan_without_prox`` (whether the call
    without ``ProximalSettings`` returns NaN), ``prox_iter``, ``constraint_dynamics_us``
    (median per call), ``forward_dynamics_us`` (``forwardDynamics`` with the 2 x 3
    constraint Jacobian and drift given), ``forward_dynamics_full_us`` (kinematics,
    Jacobians, drift and ``forwardDynamics``) and ``fd_rel_err``.
    """
    import pinocchio as pin

    model, data, cms, cds, (_, coupler, rocker) = pinocchio_model()
    q, v = joint_state(th1, w)
    tau = np.array([psi, 0.0, 0.0])
    ref = reduced_acceleration(th1, psi=psi)
    with np.errstate(invalid="ignore"):
        a_plain = pin.constraintDynamics(model, data, q, v, tau, cms, cds)
    prox = pin.ProximalSettings(1e-12, 1e-12, mu, max_iter)
    a = pin.constraintDynamics(model, data, q, v, tau, cms, cds, prox).copy()
    lam = np.array(data.lambda_c, dtype=float)
    out = {"acc": a, "acc_ref": ref, "rel_err": abs(a[0] - ref) / abs(ref),
           "branch_err": float(max(abs(a[1] + a[0]), abs(a[2] - a[0]))),
           "lambda": lam, "nan_without_prox": bool(np.isnan(a_plain).any()),
           "prox_iter": int(prox.iter), "mu": mu}

    at = pin.SE3(np.eye(3), np.array([L_ROD, 0.0, 0.0]))
    LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    zero = np.zeros(model.nv)
    dfd = model.createData()  # forwardDynamics resizes Data's constraint storage: its own Data

    def jac_drift():
        pin.forwardKinematics(model, dfd, q, v, zero)
        drift = (pin.getFrameClassicalAcceleration(model, dfd, coupler, at, LWA).linear
                 - pin.getFrameClassicalAcceleration(model, dfd, rocker, at, LWA).linear)[:2]
        pin.computeJointJacobians(model, dfd, q)
        J = (pin.getFrameJacobian(model, dfd, coupler, at, LWA)[:2]
             - pin.getFrameJacobian(model, dfd, rocker, at, LWA)[:2])
        return np.ascontiguousarray(J), np.ascontiguousarray(drift)

    J, drift = jac_drift()
    a_fd = pin.forwardDynamics(model, dfd, q, v, tau, J, drift).copy()
    out["fd_rel_err"] = abs(a_fd[0] - ref) / abs(ref)

    def full():
        Jk, dk = jac_drift()
        return pin.forwardDynamics(model, dfd, q, v, tau, Jk, dk)

    with _blas1():
        out["constraint_dynamics_us"] = median_us(
            lambda: pin.constraintDynamics(model, data, q, v, tau, cms, cds, prox), repeat, number)
        out["forward_dynamics_us"] = median_us(
            lambda: pin.forwardDynamics(model, dfd, q, v, tau, J, drift), repeat, number)
        out["forward_dynamics_full_us"] = median_us(full, repeat, max(number // 5, 1))
    return out


def pinocchio_rk4(t_end: float = 20.0, dt: float = 1e-3, psi: float = PSI,
                  baumgarte: Optional[tuple] = None, mu: float = 1e-12, max_iter: int = 10,
                  reference_frame: str = "LOCAL") -> dict:
    """Pinocchio + a hand-written RK4 in a Python loop, from ``th1 = pi/3`` at rest.

    Four ``constraintDynamics`` calls per step; no projection (optionally pinocchio's
    own Baumgarte corrector, ``baumgarte = (Kp, Kd)``). Returns ``wall_s``, ``calls``,
    the accuracy dict of the trajectory (``err_end``, ``err_max``, ``t_deviate`` the
    first time ``|th1 - ref| > 0.1``, ``t_nan``, ``closure_max``, ``coupler_angle_max``).
    The run is not stopped at a NaN, so the wall time is always that of all steps.
    """
    import pinocchio as pin

    model, data, cms, cds, _ = pinocchio_model(reference_frame=reference_frame,
                                               baumgarte=baumgarte)
    prox = pin.ProximalSettings(1e-12, 1e-12, mu, max_iter)
    tau = np.array([psi, 0.0, 0.0])
    n = int(round(t_end / dt))
    q, v = joint_state(TH0, 0.0)
    Q = np.empty((n + 1, 3))
    Q[0] = q
    cd = pin.constraintDynamics

    def f(q, v):
        return cd(model, data, q, v, tau, cms, cds, prox)

    h2, h6 = 0.5 * dt, dt / 6.0
    with _blas1(), np.errstate(all="ignore"):
        t0 = time.perf_counter()
        for k in range(n):
            a1 = f(q, v)
            v2 = v + h2 * a1
            a2 = f(q + h2 * v, v2)
            v3 = v + h2 * a2
            a3 = f(q + h2 * v2, v3)
            v4 = v + dt * a3
            a4 = f(q + dt * v3, v4)
            q = q + h6 * (v + 2.0 * (v2 + v3) + v4)
            v = v + h6 * (a1 + 2.0 * (a2 + a3) + a4)
            Q[k + 1] = q
        wall = time.perf_counter() - t0
    out = {"wall_s": wall, "calls": 4 * n, "us_per_call": wall / (4 * n) * 1e6, "dt": dt,
           "t_end": t_end, "baumgarte": baumgarte, "mu": mu}
    out.update(_trajectory_report(np.arange(n + 1) * dt, Q))
    return out


# ----------------------------------------------------------------------------- MuJoCo


def mujoco_xml(dt: float = 1e-3, integrator: str = "Euler", m: float = M_ROD, l: float = L_ROD,
               g: float = G, solref: Optional[str] = None, solimp: Optional[str] = None) -> str:
    """MJCF of the four-bar: hinges about z in the x-y plane, gravity along -y,
    ``qpos = (th1, phi, th2)`` as in :func:`pinocchio_model`, an equality ``connect``
    closing the loop and a ``motor`` on the crank (``ctrl = psi``)."""
    inertial = f'<inertial pos="{l / 2} 0 0" mass="{m}" diaginertia="1e-6 {m * l * l / 12} ' \
               f'{m * l * l / 12}"/>'
    soft = (f' solref="{solref}"' if solref else "") + (f' solimp="{solimp}"' if solimp else "")
    return f"""
<mujoco model="four_bar">
  <option timestep="{dt}" gravity="0 {-g} 0" integrator="{integrator}"/>
  <worldbody>
    <body name="crank">
      <joint name="th1" type="hinge" axis="0 0 1"/>
      {inertial}
      <body name="coupler" pos="{l} 0 0">
        <joint name="phi" type="hinge" axis="0 0 1"/>
        {inertial}
      </body>
    </body>
    <body name="rocker" pos="{l} 0 0">
      <joint name="th2" type="hinge" axis="0 0 1"/>
      {inertial}
    </body>
  </worldbody>
  <equality>
    <connect body1="coupler" body2="rocker" anchor="{l} 0 0"{soft}/>
  </equality>
  <actuator>
    <motor joint="th1" gear="1"/>
  </actuator>
</mujoco>"""


def mujoco_four_bar(t_end: float = 20.0, dt: float = 1e-3, integrator: str = "Euler",
                    psi: float = PSI, solref: Optional[str] = None, solimp: Optional[str] = None,
                    rollout: bool = True, repeat: int = 3, forward_number: int = 5000) -> dict:
    """MuJoCo whole run of the four-bar from ``th1 = pi/3`` at rest.

    ``integrator``: MJCF name (``"Euler"`` the default, ``"RK4"``, ``"implicitfast"``).
    ``solref``/``solimp``: the ``connect`` constraint's softness (MuJoCo's defaults if None).
    Returns ``wall_loop_s`` (``mj_step`` in a Python loop, the state copied out every
    step; median of ``repeat`` runs), ``wall_rollout_s`` (``mujoco.rollout``, no Python
    loop), ``forward_us`` (``mj_forward``, median), ``acc0``/``acc0_rel_err`` (``th1''``
    at the start against the reduced model) and the accuracy dict of the trajectory.
    """
    import mujoco

    model = mujoco.MjModel.from_xml_string(
        mujoco_xml(dt, integrator, solref=solref, solimp=solimp))
    data = mujoco.MjData(model)
    n = int(round(t_end / dt))
    q0, _ = joint_state(TH0, 0.0)

    def reset():
        mujoco.mj_resetData(model, data)
        data.qpos[:] = q0
        data.ctrl[:] = psi

    reset()
    mujoco.mj_forward(model, data)
    acc0 = float(data.qacc[0])
    ref0 = reduced_acceleration(TH0, psi=psi)
    out = {"integrator": integrator, "dt": dt, "t_end": t_end, "solref": solref,
           "solimp": solimp, "acc0": acc0, "acc0_rel_err": abs(acc0 - ref0) / abs(ref0)}

    Q = np.empty((n + 1, model.nq))
    step = mujoco.mj_step

    def loop():
        reset()
        Q[0] = data.qpos
        for k in range(n):
            step(model, data)
            Q[k + 1] = data.qpos

    with _blas1():
        walls = []
        for _ in range(max(repeat, 1)):
            t0 = time.perf_counter()
            loop()
            walls.append(time.perf_counter() - t0)
        out["wall_loop_s"] = float(np.median(walls))
        out["step_us"] = out["wall_loop_s"] / n * 1e6
        reset()
        mujoco.mj_forward(model, data)
        out["forward_us"] = median_us(lambda: mujoco.mj_forward(model, data), 7, forward_number)

        if rollout:
            try:
                from mujoco import rollout as mj_rollout
            except ImportError:  # pragma: no cover - older MuJoCo
                mj_rollout = None
            if mj_rollout is not None:
                spec = mujoco.mjtState.mjSTATE_FULLPHYSICS  # (time, qpos, qvel, ...)
                reset()
                s0 = np.empty(mujoco.mj_stateSize(model, spec))
                mujoco.mj_getState(model, data, s0, spec)
                ctrl = np.full((1, n, model.nu), psi)
                walls = []
                for _ in range(max(repeat, 1) + 1):  # the first call warms up
                    t0 = time.perf_counter()
                    state, _ = mj_rollout.rollout(model, data, s0[None], ctrl)
                    walls.append(time.perf_counter() - t0)
                out["wall_rollout_s"] = float(np.median(walls[1:]))
                Qr = state[0, :, 1:1 + model.nq]
                out["rollout_matches_loop"] = bool(np.array_equal(Qr, Q[1:]))
    out.update(_trajectory_report(np.arange(n + 1) * dt, Q))
    return out


# ----------------------------------------------------------------------------- scipy splu


def splu_n_four_bar(N: int, repeat: int = 7, number: Optional[int] = None) -> dict:
    """Factor-and-solve of the N-four-bar's KKT matrix with ``scipy.sparse.linalg.splu``.

    ``K = [[M, A^T], [A, 0]]`` at the initial state (``A, b = system.rows(0, q0, v0)``),
    assembled as CSC once; each timed call is ``splu(K).solve([F; b])``. Returns ``n``,
    ``m``, ``nnz`` (of K), ``nnz_lu``, ``ms`` (median per factor-and-solve),
    ``residual`` (``|K x - r| / |r|``), ``dense_diff`` (max ``|a - a_dense|``, a dense
    ``np.linalg.solve`` of the same K) and ``crank_acc_err`` (crank 0 against the
    reduced ODE's ``th''`` at ``th = pi/2``).
    """
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu

    pb = n_four_bar.build(N)
    sysm, q0, v0 = pb.system, pb.q0, pb.v0
    Mm = sysm.mass(0.0, q0)
    F = sysm.force(0.0, q0, v0)
    A, b = sysm.rows(0.0, q0, v0)
    n, m = Mm.shape[0], A.shape[0]
    As = sp.csc_matrix(A)
    K = sp.bmat([[sp.csc_matrix(Mm), As.T], [As, None]], format="csc")
    r = np.concatenate([F, b])

    def step():
        return splu(K).solve(r)

    lu = splu(K)
    x = lu.solve(r)
    a = x[:n]
    Kd = K.toarray()
    a_dense = np.linalg.solve(Kd, r)[:n]
    p = pb.params
    mass = ((N + 1) / 3.0 + N) * p["m"] * p["l"] ** 2
    kk = p["g"] * p["l"] * ((N + 1) / 2.0 + N) * p["m"]
    th_dd = -kk * np.cos(np.pi / 2) / mass
    i_phi = sysm.coordinates.index("crank0.phi")
    if number is None:
        number = max(1, int(2e-2 / max(timeit.timeit(step, number=3) / 3, 1e-7)))
    with _blas1():
        ms = median_us(step, repeat, number) / 1e3
    return {"N": N, "n": n, "m": m, "nnz": int(K.nnz), "nnz_lu": int(lu.L.nnz + lu.U.nnz),
            "ms": ms, "residual": float(np.linalg.norm(K @ x - r) / np.linalg.norm(r)),
            "dense_diff": float(np.max(np.abs(a - a_dense))),
            "crank_acc_err": float(abs(a[i_phi] - th_dd))}


def splu_growth(Ns: Sequence[int] = (10, 20, 40, 80), repeat: int = 7) -> dict:
    """:func:`splu_n_four_bar` for each N and the log-log slope of the time over N."""
    rows = [splu_n_four_bar(N, repeat=repeat) for N in Ns]
    slope = float(np.polyfit(np.log(Ns), np.log([r["ms"] for r in rows]), 1)[0])
    return {"rows": rows, "exponent": slope}


# ----------------------------------------------------------------------------- table


def _fmt(x, spec: str = "9.3g") -> str:
    if x is None:
        return format("-", ">" + spec.split(".")[0])
    return format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--t-end", type=float, default=20.0)
    args = ap.parse_args()

    print("== One step of the four-bar at th1 = th2 = pi/3, crank rate 1.3 rad/s ==")
    try:
        p = pinocchio_four_bar(repeat=args.repeat)
        print(f"Pinocchio constraintDynamics (CONTACT_3D, ProximalSettings mu = {p['mu']:g}): "
              f"th1'' = {p['acc'][0]:.15g}, reduced model {p['acc_ref']:.15g}, rel. error "
              f"{p['rel_err']:.2g}; {p['prox_iter']} proximal iterations; NaN without "
              f"ProximalSettings: {p['nan_without_prox']}")
        print(f"  constraintDynamics {p['constraint_dynamics_us']:.2f} us | forwardDynamics "
              f"(J, drift given) {p['forward_dynamics_us']:.2f} us, rel. error "
              f"{p['fd_rel_err']:.2g} | kinematics + J + drift + forwardDynamics "
              f"{p['forward_dynamics_full_us']:.2f} us")
    except ImportError as e:
        print(f"Pinocchio not available ({e})")
    try:
        mj = mujoco_four_bar(t_end=args.t_end, repeat=3)
        print(f"MuJoCo mj_forward {mj['forward_us']:.2f} us; th1'' at rest at pi/3: "
              f"{mj['acc0']:.6g} (rel. error {mj['acc0_rel_err']:.2g}, soft constraint)")
    except ImportError as e:
        mj = None
        print(f"MuJoCo not available ({e})")

    print(f"\n== Whole run, 20 s from th1 = pi/3 at rest, dt = 1e-3 (th1 vs the reduced ODE; "
          f"'dev' = first t with |err| > {DEVIATION} rad) ==")
    hdr = (f"{'peer':62s} {'wall s':>8s} {'err end':>9s} {'err max':>9s} {'dev at s':>9s} "
           f"{'NaN at s':>9s} {'closure max':>12s} {'coupler max':>12s}")
    print(hdr)
    print("(err max: over the finite part of the run; closure: distance of the coupler's far "
          "end from the rocker tip, m; coupler: max |absolute coupler angle|, 0 on the branch)")

    def row(label, r, wall):
        print(f"{label:62s} {wall:8.3f} {_fmt(r['err_end'], '9.3g')} "
              f"{_fmt(r['err_max_finite'], '9.3g')} {_fmt(r['t_deviate'], '9.3f')} "
              f"{_fmt(r['t_nan'], '9.3f')} {_fmt(r['closure_max'], '12.3g')} "
              f"{_fmt(r['coupler_angle_max'], '12.3g')}")

    try:
        for bg, mu in ((None, 1e-12), ((1e4, 200.0), 1e-12), (None, 1e-4)):
            r = pinocchio_rk4(t_end=args.t_end, baumgarte=bg, mu=mu)
            label = "Pinocchio constraintDynamics + RK4 (Python)" + (
                f", Baumgarte {bg[0]:g}/{bg[1]:g}" if bg else "") + (
                f", mu {mu:g}" if mu != 1e-12 else "")
            row(label, r, r["wall_s"])
    except ImportError:
        pass
    try:
        runs = [("Euler", None, None), ("RK4", None, None),
                ("Euler", "0.002 1", "0.9999 0.9999 0.001")]
        for integ, sref, simp in runs:
            r = mj if (integ == "Euler" and sref is None and mj is not None) else \
                mujoco_four_bar(t_end=args.t_end, integrator=integ, solref=sref, solimp=simp)
            tag = f"MuJoCo {integ}" + (f" solref {sref} solimp {simp.split()[0]}" if sref else "")
            row(tag + ", mj_step loop", r, r["wall_loop_s"])
            if "wall_rollout_s" in r:
                print(f"{tag + ', mujoco.rollout':62s} {r['wall_rollout_s']:8.3f}   (same "
                      f"trajectory: {r['rollout_matches_loop']})")
    except ImportError:
        pass

    print("\n== N-four-bar KKT factor + solve, scipy.sparse.linalg.splu of the prebuilt CSC ==")
    g = splu_growth(repeat=args.repeat)
    print(f"{'N':>4s} {'n':>5s} {'m':>5s} {'nnz K':>7s} {'nnz LU':>7s} {'ms':>8s} "
          f"{'residual':>9s} {'|a - dense|':>11s} {'crank err':>10s}")
    for r in g["rows"]:
        print(f"{r['N']:4d} {r['n']:5d} {r['m']:5d} {r['nnz']:7d} {r['nnz_lu']:7d} "
              f"{r['ms']:8.3f} {r['residual']:9.1e} {r['dense_diff']:11.1e} "
              f"{r['crank_acc_err']:10.1e}")
    print(f"growth exponent (log-log slope of ms over N): {g['exponent']:.2f}")


if __name__ == "__main__":
    with _blas1():
        main()
