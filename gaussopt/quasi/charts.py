"""The basis of the admissible velocities: rows' SVD, the automatic charts and their rotation.

:class:`Charts` is the part of :class:`~gaussopt.quasi.QuasiVelocities` that
evaluates ``B(t, q)``'s pseudo-inverse pieces, the Loewdin-orthonormalized
projection of the anchor frame (the automatic basis ``D``), the particular
solution ``w0`` and the basis' rotation ``Omega = D^T D'``; see the notes of
:mod:`gaussopt.quasi`. It reads the model pieces ``_rows``, ``_rate``,
``_user_D``, ``_user_w0`` and ``_cs`` of the class it is mixed into.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from gaussopt.core.exceptions import GaussoptError, ModelError
from gaussopt.core.checks import as_state
from gaussopt.quasi.derivatives import complex_step

__all__ = ["Frame", "Charts", "CHART_FLOOR"]

CHART_FLOOR = 1e-4  # S eigenvalue (cos^2 of a principal angle) below which a chart is broken


class Frame:
    """Everything evaluated at one (t, q): rows, pseudo-inverse pieces, basis."""

    __slots__ = ("B", "norms", "c", "Ur", "sr", "Vr", "r", "D", "w0", "X", "Xinv", "s", "Us",
                 "E", "DtD")



class Charts:
    """Frames, the automatic basis and the public maps between ``v`` and ``w``."""

    def _svd(self, B: np.ndarray, c: np.ndarray, t: float) -> Frame:
        fr = Frame()
        n = self.n
        m = B.shape[0]
        fr.B, fr.c = B, c
        if m == 0:
            fr.norms = np.zeros(0)
            fr.Ur, fr.sr, fr.Vr, fr.r = np.zeros((0, 0)), np.zeros(0), np.zeros((n, 0)), 0
            return fr
        norms = np.sqrt((B * B).sum(axis=1))
        if self._ref_norms is None or self._ref_norms.shape != norms.shape:
            self._ref_norms = norms.copy()
        else:
            np.maximum(self._ref_norms, norms, out=self._ref_norms)
        if not np.all(norms > self.rank_tol * self._ref_norms) or not np.all(np.isfinite(B)):
            raise GaussoptError(
                f"a velocity constraint row vanished or is not finite at t={t} (row norms "
                f"{norms}, largest seen {self._ref_norms}): a singular position, where the "
                "quasi-velocity parametrization is not defined. Use gaussopt.simulate with a "
                "Projection.")
        fr.norms = norms
        U, s, Vt = np.linalg.svd(B / norms[:, None], full_matrices=False)
        r = int(np.count_nonzero(s > self.rank_tol * s[0]))
        fr.Ur, fr.sr, fr.Vr, fr.r = U[:, :r], s[:r], Vt[:r].T, r
        return fr

    def _initial_anchor(self, fr: Frame) -> np.ndarray:
        """Loewdin-orthonormalized columns of P with the largest QR pivots, in coordinate order."""
        n, k = self.n, self.n - fr.r
        P = np.eye(n) - fr.Vr @ fr.Vr.T
        from scipy.linalg import qr

        _, _, piv = qr(P, pivoting=True, mode="economic")
        G = P[:, np.sort(piv[:k])]
        s, Us = np.linalg.eigh(G.T @ G)
        return G @ (Us / np.sqrt(s)) @ Us.T

    def set_anchor(self, t: float, q, E: Optional[np.ndarray] = None) -> None:
        """(Re-)anchor the automatic basis at ``(t, q)``.

        Parameters
        ----------
        t : float
        q : array_like, shape (n,)
        E : ndarray, shape (n, k), optional
            The anchor frame; default the orthonormalized columns of the
            null-space projector with the largest pivots (the quasi-velocities
            then follow the coordinates where they can).
        """
        q = as_state(q, self.n, "q")
        B, c = self._rows(float(t), q)
        fr = self._svd(B, c, float(t))
        if self.r is not None and fr.r != self.r:
            raise GaussoptError(f"the rank of the velocity constraints changed ({self.r} -> {fr.r}) "
                                f"at t={t}.")
        self.r, self.k = fr.r, self.n - fr.r
        if E is None:
            E = self._initial_anchor(fr)
        else:
            E = np.asarray(E, dtype=float)
            if E.shape != (self.n, self.k):
                raise ModelError(f"`E` must have shape ({self.n}, {self.k}), found {E.shape}.")
        self.anchor = E

    def _frame(self, t: float, q: np.ndarray, anchor: Optional[np.ndarray] = None) -> Frame:
        """Rows, pseudo-inverse pieces and basis at ``(t, q)``; the automatic basis is anchored
        at ``anchor`` if given (the frame a past step was computed in), else at ``self.anchor``."""
        B, c = self._rows(t, q)
        fr = self._svd(B, c, t)
        if self.r is None:
            self.r, self.k = fr.r, self.n - fr.r
        elif fr.r != self.r:
            raise GaussoptError(
                f"the rank of the velocity constraints changed from {self.r} to {fr.r} at t={t}: "
                "a singular position, where the number of degrees of freedom changes and the "
                "quasi-velocity parametrization breaks down. Use gaussopt.simulate with a "
                "Projection there.")
        r = fr.r
        # minimum-norm particular solution -Bn^+ cn
        if r:
            cn = c / fr.norms
            w0_min = -fr.Vr @ ((fr.Ur.T @ cn) / fr.sr)
        else:
            w0_min = np.zeros(self.n)
        if self.automatic:
            if anchor is None and self.anchor is None:
                self.set_anchor(t, q)
            E = self.anchor if anchor is None else anchor
            G = E - fr.Vr @ (fr.Vr.T @ E)
            s, Us = np.linalg.eigh(G.T @ G)
            if s.size and s[0] < CHART_FLOOR:
                raise GaussoptError(
                    f"the automatic quasi-velocity basis lost its chart at t={t} (cos^2 of the "
                    f"largest principal angle to the anchor frame = {s[0]:.3g}); decrease the "
                    "integrator's step (max_step) or raise chart_tol.")
            rs = np.sqrt(s)
            fr.X = (Us / rs) @ Us.T
            fr.Xinv = (Us * rs) @ Us.T
            fr.s, fr.Us, fr.E = s, Us, E
            fr.D = G @ fr.X
            fr.DtD = None
        else:
            fr.D = self._user_D(t, q)
            fr.DtD = fr.D.T @ fr.D
        fr.w0 = w0_min if self._w0 is None else self._user_w0(t, q)
        return fr

    def chart_quality(self, t: float, q) -> float:
        """Cosine of the largest principal angle between the anchor frame and ``null(B(t, q))``
        (1 for a user basis)."""
        if not self.automatic or self.anchor is None:
            return 1.0
        fr = self._frame(float(t), as_state(q, self.n, "q"))
        return float(np.sqrt(fr.s[0])) if fr.s.size else 1.0

    # ------------------------------------------------------------------ public maps
    def basis(self, t: float, q) -> tuple[np.ndarray, np.ndarray]:
        """``(D, w0)`` at ``(t, q)``: shapes (n, k) and (n,)."""
        fr = self._frame(float(t), as_state(q, self.n, "q"))
        return fr.D.copy(), fr.w0.copy()

    def velocity(self, t: float, q, w) -> np.ndarray:
        """Generalized velocities ``v = D w + w0``, shape (n,)."""
        D, w0 = self.basis(t, q)
        return D @ np.asarray(w, dtype=float) + w0

    def quasi(self, t: float, q, v) -> np.ndarray:
        """Quasi-velocities of ``v``: the least-squares ``w`` of ``D w = v - w0``, shape (k,)."""
        fr = self._frame(float(t), as_state(q, self.n, "q"))
        return self._w_of(fr, as_state(v, self.n, "v"))

    @staticmethod
    def _w_of(fr: Frame, v: np.ndarray) -> np.ndarray:
        if fr.DtD is None:
            return fr.D.T @ (v - fr.w0)
        return np.linalg.solve(fr.DtD, fr.D.T @ (v - fr.w0))

    def basis_rate(self, t: float, q, w) -> np.ndarray:
        """``D'``, the time derivative of the basis along the motion, shape (n, k)."""
        t = float(t)
        q = as_state(q, self.n, "q")
        fr = self._frame(t, q)
        v = fr.D @ np.asarray(w, dtype=float) + fr.w0
        if not self.automatic:
            return self._Ddot_user(t, q, v)
        R = self._rate(t, q, v, fr.D) / fr.norms[:, None] if fr.r else np.zeros((0, self.k))
        Omega, _ = self._omega(fr, R)
        pinv_R = fr.Vr @ ((fr.Ur.T @ R) / fr.sr[:, None]) if fr.r else np.zeros((self.n, self.k))
        return -pinv_R + fr.D @ Omega

    def _Ddot_user(self, t, q, v) -> np.ndarray:
        if self._dD is not None:
            return np.asarray(self._dD(t, q, v), dtype=float).reshape(self.n, -1)
        return complex_step(self._D, t, q, v, (self.n, self.k))

    def _omega(self, fr: Frame, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``Omega = D^T D'`` of the chart basis and ``Y = Bn^{+T}`` (m, n)."""
        k = self.k
        if fr.r == 0:
            return np.zeros((k, k)), np.zeros((0, self.n))
        Y = (fr.Ur / fr.sr) @ fr.Vr.T
        H = R.T @ (Y @ fr.E)
        Sd = -(fr.Xinv @ H + H.T @ fr.Xinv)
        rs = np.sqrt(fr.s)
        dk = -1.0 / (np.outer(rs, rs) * (rs[:, None] + rs[None, :]))   # Daleckii-Krein, s^(-1/2)
        Xd = fr.Us @ (dk * (fr.Us.T @ Sd @ fr.Us)) @ fr.Us.T
        return -H @ fr.X + fr.Xinv @ Xd, Y

