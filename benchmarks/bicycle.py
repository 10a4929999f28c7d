"""sympy's Whipple bicycle through ``go.from_mechanics``: derivation and conversion times.

Run: ``python3 benchmarks/bicycle.py``

Builds sympy's bicycle (``tests/test_bicycle.py``'s verbatim copy of sympy's
``test_bicycle``) and times, in one process: sympy's own ``kanes_equations``,
``go.from_mechanics(KM, model=True)`` (the derivation), ``model.system(params)`` (the
Python pieces and the numba module's source; numba's compilation happens on the first
run and is cached per machine), and ``go.kane_velocities`` on first use (its symbolic
work, cached on the method) and again. Issue 21 measured 244 s for ``from_mechanics``
and 131 s per ``kane_velocities`` call before the simplification was removed.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def main() -> None:
    import gaussopt as go
    from test_bicycle import R_REAR, _params, whipple_bicycle

    t0 = time.perf_counter()
    KM, val_dict = whipple_bicycle()
    t1 = time.perf_counter()
    params = _params(val_dict)
    model = go.from_mechanics(KM, model=True)
    t2 = time.perf_counter()
    model.system(params)
    t3 = time.perf_counter()
    u = [0.5, 5.0 / R_REAR, 0.0]
    go.kane_velocities(KM, np.zeros(4), u, params)
    t4 = time.perf_counter()
    go.kane_velocities(KM, np.zeros(4), u, params)
    t5 = time.perf_counter()
    print(f"sympy KanesMethod + kanes_equations   {t1 - t0:8.2f} s")
    print(f"go.from_mechanics(KM, model=True)     {t2 - t1:8.2f} s")
    print(f"model.system(params)                  {t3 - t2:8.2f} s")
    print(f"from_mechanics -> System, total       {t3 - t1:8.2f} s")
    print(f"go.kane_velocities, first call        {t4 - t3:8.4f} s")
    print(f"go.kane_velocities, again             {1e3 * (t5 - t4):8.3f} ms")


if __name__ == "__main__":
    main()
