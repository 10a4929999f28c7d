"""Unilateral contact: lift-off, landing and impacts, by Gauss's principle.

A contact point may push but never pull: its gap ``g(t, q) >= 0``, and its
normal force ``N >= 0`` vanishes unless the gap is closed (complementarity).
Gauss's principle takes such sign conditions as they are: the accelerations
minimize the Gauss function subject to the bilateral rows *and* the
unilateral rows ``g'' >= 0`` of the closed points, a quadratic program whose
optimality conditions are the complementarity conditions. gaussopt treats
contacts *event-driven* (the "hard contact" school of Pfeiffer and Glocker),
never by penalties or softened constraints:

* a run is a sequence of smooth phases, each integrated by
  :func:`gaussopt.simulate` with the closed points as bilateral rows (so every
  trust guarantee of a smooth run holds inside a phase);
* an open point's closing (``g = 0`` with ``g' < 0``) and a closed point's
  lift-off (``N = 0``, decreasing) are terminal events, located on the dense
  output to ``4 eps`` in time;
* at a closing the impact is resolved by the same principle at the velocity
  level: ``v+`` minimizes ``1/2 (v+ - v-)^T M (v+ - v-)`` subject to the
  bilateral velocity constraints and Newton's law ``g'+ >= -e g'-`` with
  complementarity on the impulses, for every point that touches at once;
* after every impact and lift-off, which touching points close is decided by
  the acceleration-level problem (:func:`gaussopt.contact.lcp.solve_contact`:
  an active-set solution with the verified Gauss step, redundant rows and
  singular ``M`` included).

Accumulation of impacts (Zeno)
------------------------------
A bouncing body with ``0 < e < 1`` comes to rest after infinitely many impacts
in finite time. A rebound whose apex ``g'^2 / (2 |g''|)`` lies below
``zeno_height`` (default a hundred times the integrator's position tolerance,
``100 (atol + rtol max|q0|)``) is not integrated: that impact is made plastic
at the point, which then closes. What is approximated: the remaining flights,
whose heights are below ``zeno_height`` and whose durations add up to
``2 u / (|g''| (1 - e))`` (``u`` the last rebound velocity; for the default
tolerances microseconds); the point rests from the last resolved impact on,
and ``Impact.t_accumulation`` gives the extrapolated accumulation time.

Friction
--------
A ``slip(t, q)`` function per point gives the slip rate ``T v + slip_t``.
``friction=float("inf")``: the contact point does not slip while the contact
is closed or impacting (a sticking corner, rolling without slip); the
tangential force is the multiplier of the slip row. A finite ``mu`` (planar
point contacts): a closed point at rest tangentially sticks while the sticking
force lies in the cone ``|T| <= mu N`` (two events watch the cone's edges) and
otherwise slides against it; a sliding point carries ``T = -mu N s`` (``s``
the sign of its slip rate), a force that depends on the normal force, so each
right-hand side solves the accelerations and ``N`` together (a non-symmetric
KKT system; the Gauss step of the phase then reproduces the same ``N``); the
slip rate's return to zero is an event. A sliding point whose normal
acceleration does not grow with its normal force (Painleve's paradox) has no
determined motion: :class:`~gaussopt.contact.ContactSolveError`. At an impact
the sticking impulse is taken if it lies in the cone, else the sliding one.
The stick/slip decision is made point by point on the normal active set of
the sticking problem, which is exact for one frictional point in contact.

Force events (a normal force reaching zero, a friction force reaching the
cone) are also checked at interior points of each step (``interp_points``):
the forces of a point at rest may vary with time while its state does not,
and the integrator's steps then grow long.

``dense_output=True`` gives ``traj.sol`` (:class:`ContactDenseSolution`): the
phases' dense solutions in turn, continuous from the right at an impact.

Not supported yet: spatial friction cones, user ``events`` together with
contacts, nonlinear nonholonomic constraints together with contacts (an impact
needs velocity constraints affine in ``v``).

References
----------
F. Pfeiffer, C. Glocker, *Multibody Dynamics with Unilateral Contacts*,
Wiley 1996. G. W. Housner, "The behavior of inverted pendulum structures
during earthquakes", Bull. Seismol. Soc. Am. 53 (1963) 403-417.
"""

from ..result import Impact
from .driver import ContactDenseSolution, simulate_contacts
from .lcp import ContactSolution, ContactSolveError, solve_contact
from .model import Contact, ContactPoints

__all__ = ["Contact", "ContactPoints", "Impact", "simulate_contacts", "solve_contact",
           "ContactSolution", "ContactSolveError", "ContactDenseSolution"]
