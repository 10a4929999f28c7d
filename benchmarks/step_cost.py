"""Median cost of one Gauss step per solver, with a bare numpy KKT solve as baseline.

Run: ``python3 benchmarks/step_cost.py [--repeat N]``. Two systems:

* the paper-001 four-bar (3 coordinates, singular M, 2 constraint rows), at its
  initial state with a nonzero velocity;
* ``chain7``: a planar triple pendulum of point masses in Cartesian
  coordinates plus a slider ``s`` (7 coordinates), with 6 holonomic rows (three
  rods, the slider tied to the last mass, two linear couplings): 1 DOF.

Columns: median microseconds per call of ``solver.acceleration`` (the hot path
used by the integrators) and of ``go.solve_step`` (full StepResult with
multipliers and diagnostics), and the ratio of the hot path to the baseline: a
bare ``np.linalg.solve`` of the assembled KKT matrix with the model evaluated
by the same Python callables (so the ratio isolates gaussopt's own overhead).
BLAS is limited to one thread, as ``go.simulate`` does.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gaussopt as go  # noqa: E402
from gaussopt_problems import four_bar  # noqa: E402


def chain_system() -> tuple[go.System, np.ndarray, np.ndarray]:
    """Triple pendulum of point masses (x1, y1, x2, y2, x3, y3) plus a slider s with
    x3 = s, and two linear couplings (y3 + x1/2 = c, x2 + y2 = d): 7 coordinates,
    6 independent holonomic rows, 1 DOF."""
    m = np.array([1.3, 0.7, 1.1])
    L = np.array([1.0, 0.8, 1.2])
    ms = 0.5
    M = np.diag([m[0], m[0], m[1], m[1], m[2], m[2], ms])
    g = 9.81
    F = np.array([0, -m[0] * g, 0, -m[1] * g, 0, -m[2] * g, 0.0])

    def phi(t, q):
        x1, y1, x2, y2, x3, y3, s = q
        return np.array([x1**2 + y1**2 - L[0]**2, (x2 - x1)**2 + (y2 - y1)**2 - L[1]**2,
                         (x3 - x2)**2 + (y3 - y2)**2 - L[2]**2, x3 - s,
                         y3 + 0.5 * x1 - c_const, x2 + y2 - d_const])

    # a consistent configuration
    q0 = np.array([0.6, -0.8, 0.6 + 0.8 * np.sin(0.4), -0.8 - 0.8 * np.cos(0.4), 0.0, 0.0, 0.0])
    q0[4] = q0[2] + 1.2 * np.sin(-0.3)
    q0[5] = q0[3] - 1.2 * np.cos(-0.3)
    q0[6] = q0[4]
    c_const = q0[5] + 0.5 * q0[0]
    d_const = q0[2] + q0[3]

    def jac(t, q):
        x1, y1, x2, y2, x3, y3, s = q
        J = np.zeros((6, 7))
        J[0, :2] = 2 * x1, 2 * y1
        J[1, :4] = -2 * (x2 - x1), -2 * (y2 - y1), 2 * (x2 - x1), 2 * (y2 - y1)
        J[2, 2:6] = -2 * (x3 - x2), -2 * (y3 - y2), 2 * (x3 - x2), 2 * (y3 - y2)
        J[3, 4], J[3, 6] = 1.0, -1.0
        J[4, 0], J[4, 5] = 0.5, 1.0
        J[5, 2], J[5, 3] = 1.0, 1.0
        return J

    def gamma(t, q, v):
        u1, w1, u2, w2, u3, w3, _ = v
        return -2 * np.array([u1**2 + w1**2, (u2 - u1)**2 + (w2 - w1)**2,
                              (u3 - u2)**2 + (w3 - w2)**2, 0.0, 0.0, 0.0])

    sysm = go.System(("x1", "y1", "x2", "y2", "x3", "y3", "s"), mass=M, force=F,
                     constraints=[go.Holonomic(phi, jac, gamma, rheonomic=False)], name="chain7")
    # a consistent velocity: null-space direction of J
    J = jac(0, q0)
    _, _, Vt = np.linalg.svd(J)
    v0 = 0.7 * Vt[-1]
    return sysm, q0, v0


def baseline(sysm: go.System, q, v):
    """Bare KKT: evaluate M, F, A, b through the same callables and np.linalg.solve."""
    n = sysm.n

    def step():
        M = sysm.mass(0.0, q)
        F = sysm.force(0.0, q, v)
        A, b = sysm.rows(0.0, q, v)
        m = A.shape[0]
        K = np.zeros((n + m, n + m))
        K[:n, :n] = M
        K[:n, n:] = A.T
        K[n:, :n] = A
        return np.linalg.solve(K, np.concatenate([F, b]))[:n]

    return step


def median_us(fn, repeat: int, number: int) -> float:
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return float(np.median(times)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    fb = four_bar.system()
    q_fb = np.array([np.pi / 3, np.pi / 3, 2 * np.pi / 3])
    v_fb = np.array([1.3, 1.3, -1.3])
    chain, q_ch, v_ch = chain_system()
    cases = [("four_bar (n=3, m=2, singular M)", fb, q_fb, v_fb),
             ("chain7 (n=7, m=6)", chain, q_ch, v_ch)]
    number = {"closed_form": 2000, "lagrange": 2000, "qp": 50, "ga": 5}
    print(f"{'system':34s} {'solver':12s} {'hot path us':>12s} {'solve_step us':>14s} "
          f"{'ratio to baseline':>18s}")
    for label, sysm, q, v in cases:
        sysm.check(0.0, q, v)
        base_fn = baseline(sysm, q, v)
        base = median_us(base_fn, args.repeat, 2000)
        print(f"{label:34s} {'numpy KKT':12s} {base:12.1f} {'':>14s} {1.0:18.2f}")
        for name in ("closed_form", "lagrange", "qp", "ga"):
            s = go.make_solver(sysm, name)
            s.solve(0.0, q, v)  # builds the QP once, warms caches
            k = number[name]
            if name == "ga":
                def hot(s=s):
                    s.reset()  # every call a cold GA (no warm start): worst case
                    return s.acceleration(0.0, q, v)
            else:
                def hot(s=s):
                    return s.acceleration(0.0, q, v)
            t_hot = median_us(hot, args.repeat, k)
            t_full = median_us(lambda s=s: go.solve_step(sysm, 0.0, q, v, solver=s),
                               args.repeat, k)
            print(f"{label:34s} {name:12s} {t_hot:12.1f} {t_full:14.1f} {t_hot / base:18.2f}")


if __name__ == "__main__":
    # as inside go.simulate: one BLAS thread (threaded trsm on 3x3 matrices stalls)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        main()
