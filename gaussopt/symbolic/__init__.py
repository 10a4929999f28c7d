"""Symbolic front end: a Lagrangian and constraints in sympy -> a :class:`~gaussopt.System`.

Users write the kinetic energy ``T``, the potential ``V``, generalized forces
and constraints as sympy expressions; everything the Gauss step needs is
derived exactly and compiled once into fast numeric callables:

============================  ===================================================
piece                         derivation (``L = T - V``, ``D`` = total d/dt)
============================  ===================================================
mass matrix ``M(t, q)``       ``d^2 L / dq' dq'`` (the Hessian of ``T`` for ``V(q, t)``)
inertia term ``g``            ``D(dT/dq')|_{q''=0} - dT/dq`` (Christoffel terms, and
                              the rheonomic ones when ``T`` depends on ``t``)
force ``F(t, q, v)``          ``Q - D(dL/dq')|_{q''=0} + dL/dq`` (``= Q - dV/dq - g``)
holonomic ``Phi(t, q)``       ``Phi_q a = -(Phi_q v)_q v - 2 Phi_qt v - Phi_tt``
nonholonomic ``f(t, q, v)``   ``f_v a = -(f_q v + f_t)`` (linear or nonlinear in ``v``)
acceleration ``h(t,q,v,a)``   ``(dh/da) a = -h|_{a=0}`` (must be linear in ``a``)
energy                        ``T + V``
============================  ===================================================

so that ``M q'' + g = Q - dV/dq`` are Lagrange's equations of the second kind
of the unconstrained system. The energy ``T + V`` is a diagnostic, conserved
only under the conditions listed in the Notes of :class:`SymbolicModel`
(no work by ``Q`` nor by the constraint forces, nothing depends on ``t``).

Coordinates
-----------
``q`` is a sequence of sympy functions of one time symbol
(``sympy.physics.mechanics.dynamicsymbols('x y')`` or ``sympy.Function('x')(t)``);
expressions then use ``q``, ``q.diff(t)`` and ``q.diff(t, 2)``. Plain symbols are
accepted too: the velocity and acceleration of a coordinate ``x`` are then the
symbols ``x_dot`` and ``x_ddot`` (created with the assumptions of ``x``; pass
``velocities=``/``accelerations=`` to choose others) and ``t`` is
``Symbol("t")`` unless given.

Parameter sets
--------------
Every other free symbol is a parameter. One :class:`SymbolicModel` is derived
(:meth:`SymbolicModel.derive`) and compiled once; :meth:`SymbolicModel.system`
binds a parameter set ``{Symbol or name: value}`` at no compile cost, so one
derivation serves many parameter sets. Unbound symbols raise a
:class:`~gaussopt.core.exceptions.ModelError` that lists them; only the symbols
that ``M``, ``F`` and the constraints use need values (a constant that only
shifts the potential does not: :attr:`SymbolicModel.energy_only_parameters`).

Specified inputs
----------------
Any other function of ``t`` alone (``F = dynamicsymbols('F')``,
``sympy.Function('F')(t)``) is a specified input, PyDy's ``specifieds``: given at
binding as ``specified={F: f}`` with ``f`` a number (a parameter of the compiled
model) or a callable ``f(t, q, v)`` evaluated at each call of the pieces that use
it (the System then runs through its Python functions). Where the derivation
differentiates an input in time (an input in a position, the Lagrangian or a
constraint), its derivatives are inputs of their own (``F.diff(t)``). A missing
input is reported with how to pass it.

Compilation
-----------
Every piece is compiled once with common-subexpression elimination, the way
``sympy.lambdify(..., cse=True)`` does (sympy's ``cse`` and its code printers),
into a Python function with the documented argument order ``(t, q)`` or
``(t, q, v)`` returning float arrays of the documented shape (never ``(n, 1)``
or integer arrays). Parameters are bound as globals of a copy of the compiled
function, so binding costs nothing per call. Pieces that do not depend on
``(t, q, v)`` for the bound parameters are evaluated once and passed to
:class:`~gaussopt.System` as constant arrays.

``modules="math"`` (default) unpacks the state with ``ndarray.tolist()`` and
evaluates with the ``math`` module on Python floats, about 3x faster than
numpy scalar arithmetic at the sizes of mechanics (medians on a shared 2-core
machine: paper 001's four-bar ``F`` 1.6 vs 4.7 us, its rows 3.6 vs 10.6 us; a
5-link pendulum chain in joint angles ``F`` 4.5 vs 14 us), but it takes real
inputs only. ``modules="numpy"`` also takes complex inputs (complex-step
checks); ``modules="scipy"`` adds ``scipy.special`` (Bessel functions, ...),
which the ``math`` printer cannot print.

sympy.physics.mechanics
-----------------------
:func:`from_mechanics` takes a ``LagrangesMethod`` (its ``mass_matrix`` and
``forcing``, with its holonomic and nonholonomic constraints), any
``KanesMethod``, or a ``JointsMethod`` or ``System`` as they are (the method
they form their equations with). For a ``KanesMethod`` its generalized speeds
are eliminated through its kinematic differential equations solved for them,
``u = W(q, t) q' + w0(q, t)``, and Kane's equations are formed with ``q'`` as
the speeds (``M = W^T M_u W``), so the System's state is ``(q, q')``; velocity
constraints (``u_dependent``) and constraints given in the speeds ``u`` or in
``q'`` are kept as nonholonomic constraints, auxiliary speeds are set to zero;
a speed without a coordinate (an ignorable angle: the wheel spins of sympy's
bicycle) gets one, ``int_<speed>``, added after the method's coordinates.
:func:`kane_velocities` turns initial speeds into ``q'`` (the symbolic work
cached on the method). Where ``W`` is singular (a singular chart of the
coordinates: Euler angles at gimbal lock, sympy's rolling disc lying flat at
the lean ``q2 = +-pi/2``) ``M`` is singular and ``q'`` grows like ``1/cos q2``
near it; the step there is not determined by the model.

References
----------
- F. E. Udwadia, R. E. Kalaba, "A new perspective on constrained motion",
  Proc. R. Soc. Lond. A 439 (1992) 407-410.

Examples
--------
A pendulum of mass ``m`` on a rod of length ``l`` in Cartesian coordinates:

>>> import sympy as sp, numpy as np
>>> from sympy.physics.mechanics import dynamicsymbols
>>> from gaussopt.symbolic import from_lagrangian
>>> x, y = dynamicsymbols("x y")
>>> m, l, g = sp.symbols("m l g", positive=True)
>>> t = dynamicsymbols._t
>>> pend = from_lagrangian([x, y], T=m / 2 * (x.diff(t)**2 + y.diff(t)**2), V=m * g * y,
...                        holonomic=[x**2 + y**2 - l**2], params={m: 2.0, l: 1.5, g: 9.81})
>>> pend.mass(0.0, np.zeros(2))
array([[2., 0.],
       [0., 2.]])
>>> pend.rows(0.0, np.array([1.5, 0.0]), np.array([0.0, 2.0]))
(array([[3., 0.]]), array([-8.]))
"""


from gaussopt.symbolic._compile import MODULES
from gaussopt.symbolic.mechanics import from_mechanics, kane_velocities
from gaussopt.symbolic.symbolic_model import SymbolicModel, from_lagrangian

__all__ = ["SymbolicModel", "from_lagrangian", "from_mechanics", "kane_velocities", "MODULES"]
