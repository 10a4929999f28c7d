"""One-time checks of a quasi-velocity model: affinity in ``v``, derivative paths, a user basis."""

from __future__ import annotations

import warnings

import numpy as np

from gaussopt.model.constraints import Nonholonomic
from gaussopt.core.exceptions import ModelError
from gaussopt.quasi.derivatives import ComplexWarning, complex_step, fd4, nh_rate_cs, nh_rate_fd

__all__ = ["Checks"]


class Checks:
    """The checks :class:`~gaussopt.quasi.QuasiVelocities` runs once, at the first state."""

    def _prepare(self, t: float, q: np.ndarray, v: np.ndarray) -> None:
        """Check linearity in ``v`` and the derivative paths once, at one state."""
        n = self.n
        problems = []
        for i, con in enumerate(self._cons):
            if not isinstance(con, Nonholonomic):
                continue
            if not con.is_affine(t, q, v):
                problems.append(
                    f"constraint {con.name!r} is nonlinear in the velocities (its Jacobian f_v "
                    "changes with v); quasi-velocities v = D w + w0 need constraints affine in v. "
                    "Use gaussopt.simulate, whose Gauss step treats nonlinear nonholonomic "
                    "constraints")
                continue
            ref = max(float(np.abs(con.jacobian(t, q, v)).max(initial=0.0)), 1e-300)
            # the rate of the rows by the complex step of f along (1, v) at a fixed velocity
            # argument when f is complex-safe (checked once against a difference of f_v),
            # else by a 4th-order difference of f_v
            U = np.eye(n)
            fd = nh_rate_fd(con, t, q, v, U)
            try:
                with warnings.catch_warnings():      # math.* on complex input: a cast warning
                    warnings.simplefilter("ignore", ComplexWarning)
                    cs = nh_rate_cs(con, t, q, v, U)
                err = float(np.abs(cs - fd).max(initial=0.0))
                self._nh_complex[i] = err <= 1e-6 * max(float(np.abs(fd).max(initial=0.0)), ref)
            except (TypeError, ValueError):
                self._nh_complex[i] = False
        if problems:
            raise ModelError("QuasiVelocities cannot treat the system: " + "; ".join(problems) + ".")
        if not self.automatic:
            self._check_user(t, q, v)
        self._prepared = True

    def _check_user(self, t: float, q: np.ndarray, v: np.ndarray) -> None:
        """Validate the user's D, w0 (shapes, null space, rank) and their derivative paths."""
        n = self.n
        B, c = self._rows(t, q)
        fr = self._svd(B, c, t)
        D = self._user_D(t, q)
        k = n - fr.r
        problems = []
        if D.shape != (n, k):
            raise ModelError(f"`D(t, q)` must have shape ({n}, {k}) (n coordinates, n - rank B = "
                             f"{k} degrees of freedom), found {D.shape}.")
        nb = B / fr.norms[:, None] if B.shape[0] else B
        res = float(np.abs(nb @ D).max(initial=0.0))
        dn = float(np.abs(D).max(initial=0.0))
        if res > 1e-9 * max(dn, 1e-300):
            problems.append(f"`D` does not span admissible velocities: max |B D| (rows normalized) "
                            f"= {res:.3g} relative to max |D| = {dn:.3g}; expected B D = 0")
        sv = np.linalg.svd(D, compute_uv=False)
        if k and sv[-1] <= self.rank_tol * sv[0]:
            problems.append(f"`D` is rank deficient (singular values {sv}); expected rank {k}")
        if self._w0 is not None:
            w0 = self._user_w0(t, q)
            if w0.shape != (n,):
                problems.append(f"`w0(t, q)` must have shape ({n},), found {w0.shape}")
            elif B.shape[0]:
                r0 = float(np.abs((B @ w0 + c) / fr.norms).max())
                if r0 > 1e-9 * (1.0 + float(np.abs(w0).max())):
                    problems.append(f"`w0` violates the velocity constraints: max |B w0 + c| "
                                    f"(rows normalized) = {r0:.3g}")
        if self._dD is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ComplexWarning)
                    cs = complex_step(self._D, t, q, v, (n, k))
            except TypeError as e:
                problems.append(f"`D` is not complex-safe ({e}); use numpy ufuncs or pass dD=")
            else:
                fd = fd4(lambda s: self._user_D(t + s, q + s * v), v)
                if np.abs(cs - fd).max(initial=0.0) > 1e-6 * max(float(np.abs(fd).max(initial=0.0)), dn):
                    problems.append("the complex-step derivative of `D` disagrees with a finite "
                                    "difference: D is not complex-safe (abs, math.*, casts); write it "
                                    "with numpy ufuncs or pass dD=")
        else:
            dd = np.asarray(self._dD(t, q, v), dtype=float)
            if dd.shape != (n, k):
                problems.append(f"`dD(t, q, v)` must have shape ({n}, {k}), found {dd.shape}")
            else:
                fd = fd4(lambda s: self._user_D(t + s, q + s * v), v)
                if np.abs(dd - fd).max(initial=0.0) > 1e-6 * max(float(np.abs(fd).max(initial=0.0)), dn):
                    problems.append(f"`dD` disagrees with a finite difference of D along (1, v) "
                                    f"(max difference {np.abs(dd - fd).max():.3g})")
        if self._w0 is not None and self._dw0 is not None:
            dw = np.asarray(self._dw0(t, q, v), dtype=float).reshape(-1)
            fd = fd4(lambda s: self._user_w0(t + s, q + s * v), v)
            if dw.shape != (n,) or np.abs(dw - fd).max(initial=0.0) > \
                    1e-6 * max(float(np.abs(fd).max(initial=0.0)), 1.0):
                problems.append("`dw0` disagrees with a finite difference of w0 along (1, v) or "
                                f"has the wrong shape ({dw.shape}, expected ({n},))")
        if self._w0 is not None and self._dw0 is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ComplexWarning)
                    cs = complex_step(self._w0, t, q, v, (n,))
            except TypeError as e:
                problems.append(f"`w0` is not complex-safe ({e}); pass dw0=")
            else:
                fd = fd4(lambda s: self._user_w0(t + s, q + s * v), v)
                if np.abs(cs - fd).max(initial=0.0) > 1e-6 * max(float(np.abs(fd).max(initial=0.0)), 1.0):
                    problems.append("the complex-step derivative of `w0` disagrees with a finite "
                                    "difference: w0 is not complex-safe; pass dw0=")
        if problems:
            raise ModelError("QuasiVelocities: " + "; ".join(problems) + ".")

