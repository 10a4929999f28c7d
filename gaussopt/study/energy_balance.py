"""The energy balance of a run: what impacts and friction took, and the numerical drift.

A run of a system with contacts (:mod:`gaussopt.integrate.contact_run`) loses
energy for physical reasons: at an impact with restitution ``e < 1`` (the
kinetic energy ``1/2 v^T M v`` drops while ``q`` stays), and while a point slides
against Coulomb friction (the friction force does the negative work
``int T . slip rate dt``). The change ``E(t) - E(0)`` of such a run is not drift;
what the integration got wrong is

    drift(t) = E(t) - E(0) + (energy lost at impacts up to t) + (energy dissipated
               by friction up to t),

zero for the exact motion. :func:`energy_balance` computes the three terms at the
run's samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from gaussopt.core.result import Trajectory

__all__ = ["EnergyBalance", "energy_balance", "impact_losses"]


@dataclass
class EnergyBalance:
    """The terms of the energy balance at a run's samples.

    Attributes
    ----------
    t : ndarray, shape (N,)
    change : ndarray, shape (N,)
        ``E(t) - E(0)``.
    impact_loss : ndarray, shape (N,)
        The kinetic energy lost at the impacts up to each sample (>= 0): at a
        sample at the time of an impact, the state after it counts it, the state
        before it does not.
    friction_loss : ndarray, shape (N,)
        The energy dissipated by sliding friction up to each sample (>= 0 for
        Coulomb friction): ``-int sum_i T_i s_i' dt`` (``T_i`` the friction force of
        point ``i`` along its slip gradient, ``s_i'`` its slip rate) by Simpson's rule
        on the samples of each smooth piece of the run (:func:`_pieces`: between its
        impacts and contact transitions, where the power jumps or kinks; the
        trapezoidal rule on a piece of two samples; a step with a transition inside,
        as a run sampled at ``t_eval`` has, from each side's samples up to the
        transition, :func:`_kink_step`); zeros without frictional contacts.
    friction_error : float
        An estimate of the quadrature error of ``friction_loss[-1]``: Simpson's rule
        against the trapezoidal rule on the same pieces, ``|W_S - W_T|`` (the
        trapezoid's error, larger than Simpson's where the power is smooth; both are
        exact for a power linear between samples). 0 without friction work; NaN when
        it could not be computed.
    drift : ndarray, shape (N,)
        ``change + impact_loss + friction_loss``: what the integration got wrong.
    impact_source : str
        ``"recorded"`` (the kinetic energies the run recorded at each impact),
        ``"samples"`` (the energies of the samples before and after), or ``""``
        (no impacts).
    friction_source : str
        ``"model"`` (slip rates from the system's contacts), ``"none"`` (no
        friction force in the run), or ``"unknown"`` (friction forces but no
        system to evaluate the slip rates: ``friction_loss`` is NaN).
    """

    t: np.ndarray
    change: np.ndarray
    impact_loss: np.ndarray
    friction_loss: np.ndarray
    friction_error: float
    drift: np.ndarray
    impact_source: str
    friction_source: str

    @property
    def has_losses(self) -> bool:
        """True when the run lost energy at impacts or by friction (or may have)."""
        return bool(np.any(self.impact_loss != 0) or np.any(self.friction_loss != 0)
                    or self.friction_source == "unknown")


def impact_losses(traj: Trajectory) -> tuple[np.ndarray, str]:
    """``(losses, source)``: the kinetic energy lost at each of ``traj.impacts``, shape
    (len(impacts),), from the kinetic energies the run recorded (``source =
    "recorded"``) or, where those are not finite, from the energies of the samples
    before and after the impact at its time (``"samples"``; NaN where the run has no
    such pair)."""
    losses, sources = [], set()
    t = np.asarray(traj.t, dtype=float)
    E = None if traj.energy is None else np.asarray(traj.energy, dtype=float)
    for im in traj.impacts:
        d = float(im.kinetic_before) - float(im.kinetic_after)
        if np.isfinite(d):
            losses.append(d)
            sources.add("recorded")
            continue
        at = np.flatnonzero(t == im.t)
        if E is not None and at.size >= 2:
            losses.append(float(E[at[0]] - E[at[-1]]))
            sources.add("samples")
        else:
            losses.append(np.nan)
    source = ("recorded" if sources == {"recorded"} else "samples" if sources == {"samples"}
              else "recorded and samples" if sources else "")
    return np.array(losses, dtype=float), source


def _after(t: np.ndarray, t_impact: float) -> np.ndarray:
    """Samples that hold the state after an impact at ``t_impact``: those later, and at
    its time all but the first (the run stores the state before the impact and then
    the state after, at the same time), or the only one when the run starts there."""
    after = t > t_impact
    at = np.flatnonzero(t == t_impact)
    if at.size >= 2:
        after[at[1:]] = True
    elif at.size == 1 and at[0] == 0:
        after[0] = False              # the run's initial state: E(0) already after it
    return after


def _friction_power(traj: Trajectory, system) -> Optional[np.ndarray]:
    """``sum_i T_i s_i'`` at each sample (the power of the friction forces), zeros when no
    contact can slide (``friction = inf`` sticks: its force does no work), None
    without a system whose contacts give the slip rates."""
    contacts = getattr(system, "contacts", None)
    if contacts is None:
        return None
    contacts = tuple(contacts)
    if not any(c.frictional and not c.sticks for c in contacts):
        return np.zeros(len(traj))
    from gaussopt.model.contact import ContactPoints

    P = ContactPoints(contacts, float(traj.t[0]), np.asarray(traj.q[0], dtype=float))
    fr = np.asarray(traj.friction_forces, dtype=float)
    power = np.zeros(len(traj))
    if fr.ndim == 3:
        # points in space: friction (k, 2) against each point's slip velocity (k, 2)
        for k in np.flatnonzero(np.any(fr != 0, axis=(1, 2))):
            t = float(traj.t[k])
            q, v = np.asarray(traj.q[k], dtype=float), np.asarray(traj.v[k], dtype=float)
            U = np.zeros((P.k, 2))
            for j, c in enumerate(P.contacts):
                if c.cone is not None:
                    U[P.owner == j] = np.reshape(c.cone.residual(t, q, v), (-1, 2))
            power[k] = float(np.sum(fr[k] * U))
        return power
    for k in np.flatnonzero(np.any(fr != 0, axis=1)):
        q, v = np.asarray(traj.q[k], dtype=float), np.asarray(traj.v[k], dtype=float)
        T, ct, _ = P.tangent_rows(float(traj.t[k]), q, v)
        power[k] = float(fr[k] @ (T @ v + ct))
    return power


def _cumulative_trapezoid(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.zeros_like(y)
    out[1:] = np.cumsum(0.5 * np.diff(t) * (y[1:] + y[:-1]))
    return out


def _pieces(t: np.ndarray, breaks) -> list:
    """The smooth pieces of a run's samples ``t``, as ``(start, stop, kinks)``: index
    ranges over which the power is smooth (``kinks`` empty), and single steps
    ``(i, i + 1)`` with the times ``kinks`` of transitions strictly inside them. A new
    piece starts where a time repeats (the states before and after an impact or a
    transition, stored at the same time); a sample at one of the times ``breaks`` (the
    run's contact transitions, where the power may kink) ends one piece and starts the
    next; a break between two samples (a run sampled at ``t_eval``) makes the step
    around it a piece of its own."""
    n = len(t)
    cuts = set((np.flatnonzero(np.diff(t) == 0) + 1).tolist())
    shared, inside = set(), {}
    for tb in breaks:
        i = int(np.searchsorted(t, tb))
        if i >= n or i == 0:
            continue
        if t[i] == tb:
            if i < n - 1 and i not in cuts and i + 1 not in cuts:
                shared.add(i)
        elif t[i - 1] < tb < t[i]:
            inside.setdefault(i - 1, []).append(float(tb))
    for i in inside:                    # the step around a kink: ends and starts pieces
        shared.update(j for j in (i, i + 1) if 0 < j < n - 1 and j not in cuts)
    out, start = [], 0
    for i in sorted(cuts | shared) + [n]:
        stop = i + 1 if i in shared else i
        if stop > start:
            kinks = tuple(sorted(inside[start])) if stop - start == 2 and start in inside else ()
            out.append((start, stop, kinks))
        start = i
    return out


def _kink_step(t: np.ndarray, y: np.ndarray, i: int, kinks: tuple, lo: int, hi: int) -> float:
    """``int y`` over the step ``(t[i], t[i + 1])`` with transitions at ``kinks`` inside
    it: each side's samples extrapolated linearly to its nearest kink (from the step
    before and the step after, within ``lo .. hi``, the samples of the same smooth
    stretch), linear between the kinks. Exact for a power linear on each side."""
    t0, t1, y0, y1 = t[i], t[i + 1], y[i], y[i + 1]
    k0, k1 = kinks[0], kinks[-1]
    yl = y0 + (y0 - y[i - 1]) / (t0 - t[i - 1]) * (k0 - t0) \
        if i - 1 >= lo and t[i - 1] < t0 else y0
    yr = y1 - (y[i + 2] - y1) / (t[i + 2] - t1) * (t1 - k1) \
        if i + 2 < hi and t[i + 2] > t1 else y1
    return float(0.5 * (y0 + yl) * (k0 - t0) + 0.5 * (yl + yr) * (k1 - k0)
                 + 0.5 * (yr + y1) * (t1 - k1))


def _cumulative_pieces(t: np.ndarray, y: np.ndarray, pieces: list) -> tuple:
    """``int_0^t y`` at every sample: Simpson's rule on each smooth piece (scipy's
    ``cumulative_simpson``, exact for a quadratic on any spacing; the trapezoid on a
    piece of two samples) and :func:`_kink_step` on a step with a kink inside; and the
    trapezoidal rule's total on the same samples."""
    from scipy.integrate import cumulative_simpson

    out = np.zeros_like(y)
    acc, trap = 0.0, 0.0
    for j, (a, b, kinks) in enumerate(pieces):
        ts, ys = t[a:b], y[a:b]
        if kinks:
            # the samples around it that belong to the same smooth stretch: the pieces
            # before and after, unless a repeated time (a jump) separates them
            lo = pieces[j - 1][0] if j > 0 and pieces[j - 1][1] == a + 1 else a
            hi = pieces[j + 1][1] if j + 1 < len(pieces) and pieces[j + 1][0] == b - 1 else b
            c = np.array([0.0, _kink_step(t, y, a, kinks, lo, hi)])
        elif len(ts) >= 3:
            c = cumulative_simpson(ys, x=ts, initial=0.0)
        else:
            c = _cumulative_trapezoid(ts, ys)
        out[a:b] = acc + c
        acc = out[b - 1]
        trap += _cumulative_trapezoid(ts, ys)[-1]
    return out, trap


def energy_balance(traj: Trajectory, system=None) -> Optional[EnergyBalance]:
    """The energy balance of ``traj`` (see the module docstring), or None when the run
    has no energy.

    Parameters
    ----------
    traj : Trajectory
        A run; with contacts, its ``impacts`` and ``friction_forces`` are used.
    system : System, optional
        The run's system: needed for the work of sliding friction (its contacts
        give the slip rates). Without it a run with friction forces gets
        ``friction_loss`` NaN and ``friction_source = "unknown"``.

    Returns
    -------
    EnergyBalance or None

    Examples
    --------
    A ball dropped from 1 m onto the floor with restitution 0.5 (0.5 kg: the impact
    takes 3/4 of the 4.9 J it falls with):

    >>> import numpy as np, gaussopt as go
    >>> floor = go.Contact(lambda t, q: np.array([q[0]]), restitution=0.5, rheonomic=False)
    >>> ball = go.System(("y",), mass=[[0.5]], force=[-0.5 * 9.81], constraints=[floor],
    ...                  energy=lambda t, q, v: 0.25 * v @ v + 0.5 * 9.81 * q[0])
    >>> tr = go.simulate(ball, (0.0, 0.6), [1.0], [0.0], rtol=1e-10, atol=1e-10)
    >>> bal = energy_balance(tr, ball)
    >>> round(float(bal.impact_loss[-1]), 6), round(float(bal.change[-1]), 6)
    (3.67875, -3.67875)
    >>> bool(np.max(np.abs(bal.drift)) < 1e-8)
    True
    """
    if traj.energy is None or not len(traj):
        return None
    t = np.asarray(traj.t, dtype=float)
    E = np.asarray(traj.energy, dtype=float)
    change = E - E[0]
    impact = np.zeros(len(t))
    losses, source = impact_losses(traj)
    for im, loss in zip(traj.impacts, losses):
        impact[_after(t, float(im.t))] += loss
    friction = np.zeros(len(t))
    f_err, f_source = 0.0, "none"
    fr = traj.friction_forces
    if fr is not None and np.any(np.asarray(fr) != 0):
        power = _friction_power(traj, system) if system is not None else None
        if power is None:
            friction[:] = np.nan
            f_err, f_source = np.nan, "unknown"
        elif not np.any(power != 0):        # sticking points only: no work
            pass
        else:
            breaks = [float(x[0]) for x in (traj.meta.get("contact_transitions") or ())]
            work, trap = _cumulative_pieces(t, power, _pieces(t, breaks))
            friction = -work
            f_err, f_source = float(abs(work[-1] - trap)), "model"
    return EnergyBalance(t=t, change=change, impact_loss=impact, friction_loss=friction,
                         friction_error=f_err, drift=change + impact + friction,
                         impact_source=source, friction_source=f_source)
