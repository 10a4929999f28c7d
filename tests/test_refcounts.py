"""The kernel's functions run without numba's reference counting (``_nrt=False``,
:data:`gaussopt.gauss.dense_step._leaf`): a view made inside them costs nothing, but the rules
that make this safe are checked here, since a broken rule would not fail loudly:

* a leaf returns no array (its caller, if it counts references, would release a
  reference it was never given, and free a workspace still in use);
* a run, a step and the linear-algebra front ends free every block they allocate
  (a leaf that took a new reference from a counting callee would never give it back:
  the workspace would leak).

numba checks a third rule itself: a leaf that allocates does not compile.
"""

import ast
import inspect
import subprocess
import sys
import textwrap

import numba as nb
import numpy as np


import gaussopt.gauss.solution as solution
import gaussopt.integrate.engine as E
import gaussopt.gauss.dense_step as K
import gaussopt.gauss.dense_algebra as LA
import gaussopt.gauss.band_step as SP
import gaussopt.gauss.workspace as WS
import gaussopt.multibody.tree.tree_compiled as TREE


def _holds_array(ty) -> bool:
    if isinstance(ty, (nb.types.Array, nb.types.StructRef)):
        return True
    if isinstance(ty, nb.types.BaseTuple):
        return any(_holds_array(t) for t in ty.types)
    return False


def _leaves():
    seen = set()
    for mod in (K, LA, WS, E, SP, TREE):
        for name in dir(mod):
            d = getattr(mod, name)
            d = getattr(d, "dispatcher", d)       # (a unit of gaussopt.core.compiled: its dispatcher)
            if (isinstance(d, nb.core.registry.CPUDispatcher) and d.targetoptions.get("_nrt") is False
                    and id(d) not in seen):
                seen.add(id(d))
                yield f"{mod.__name__}.{name}", d


def _returned_arrays(fn):
    """Parameters of ``fn`` that it returns (bare, or inside a returned tuple) and uses as
    arrays somewhere (indexed, or asked for their ``shape``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    params = set(inspect.signature(fn).parameters)
    arrays = set()
    returned = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            arrays.add(node.value.id)
        if (isinstance(node, ast.Attribute) and node.attr == "shape"
                and isinstance(node.value, ast.Name)):
            arrays.add(node.value.id)
        if isinstance(node, ast.Return) and node.value is not None:
            vals = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            returned.update(v.id for v in vals if isinstance(v, ast.Name))
    return sorted(params & arrays & returned)


def _returns_an_argument(x, n):
    x[0] = n
    return x, n


def test_leaves_return_no_arrays():
    leaves = list(_leaves())
    assert len(leaves) >= 20, [n for n, _ in leaves]     # the kernel's are found
    assert sum(n.startswith(TREE.__name__) for n, _ in leaves) >= 20   # and the tree's
    # numba refuses to compile a leaf that returns an array it made (a view, a slice);
    # what it allows is returning an argument as it came: no leaf does
    for name, d in leaves:
        back = _returned_arrays(d.py_func)
        assert not back, f"{name} returns its array argument(s) {back}"
    assert _returned_arrays(_returns_an_argument) == ["x"]     # (the check can fail)
    # and the signatures compiled here (the ones Python calls directly) say the same
    solution.solve_gauss(np.diag([1.0, 2.0, 3.0]), np.ones(3),
                          np.array([[1.0, 0, 1], [2, 0, 2]]), np.zeros(2),
                          want_multipliers=True)
    solution.decide(np.eye(3), np.array([[1.0, 0, 1]]), np.zeros(1))
    compiled = 0
    for name, d in leaves:
        for sig in d.nopython_signatures:
            compiled += 1
            assert not _holds_array(sig.return_type), f"{name} returns {sig.return_type}"
    assert compiled >= 2


_CHILD = textwrap.dedent("""
    import gc, json, sys
    import numpy as np
    from numba.core.runtime import rtsys
    import gaussopt as go
    import gaussopt.gauss.dense_algebra as LA
    import gaussopt.gauss.solution as solution
    from gaussopt_problems import four_bar, n_four_bar
    from gaussopt.multibody.io.mjcf import load

    def work():
        pb = four_bar.build(t_end=0.5)
        tr = go.simulate(pb.system, pb.t_span, pb.q0, pb.v0, **pb.settings)
        assert tr.t[-1] == 0.5
        go.solve_step(pb.system, 0.0, pb.q0, pb.v0, solver="closed_form")
        st = go.Stepper(pb.system, pb.q0, pb.v0, dt=1e-3, inputs=("psi",))
        for k in range(200):                             # (a new input every step)
            st.step(450.0 + k)
        nb_ = n_four_bar.build(N=4, t_end=0.05)
        go.simulate(nb_.system, nb_.t_span, nb_.q0, nb_.v0, **nb_.settings)
        rng = np.random.default_rng(1)
        A = rng.standard_normal((3, 5))
        A[2] = A[0] + A[1]                               # redundant: the multipliers' SVD
        solution.solve_gauss(np.eye(5), np.ones(5), A, A @ np.ones(5), want_multipliers=True)
        solution.decide(np.eye(5), A, np.zeros(3))
        LA.svd_econ(rng.standard_normal((60, 50)))        # the LAPACK branch
        # the tree kernel (joint coordinates): balls, a free joint, closures, the O(n) step
        for path, t_end in (("tests/data/humanoid_tree.xml", 0.02),
                            ("tests/data/four_bar_connect.xml", 0.05)):
            tree = load(path)
            q0, v0 = tree.initial_state()
            go.simulate(tree.system, (0.0, t_end), q0, v0)
            go.solve_step(tree.system, 0.0, q0, v0 + 0.1)
            tree.system.energy(0.0, q0, v0)
            tree.kinematics(q0, v0)
            tree.mass(0.0, q0)
            tree.force(0.0, q0, v0)

    def stats():
        gc.collect()
        s = rtsys.get_allocation_stats()
        return s.alloc, s.free, s.mi_alloc, s.mi_free

    work()                                               # compiled; caches filled
    a0, f0, ma0, mf0 = stats()
    work()
    a1, f1, ma1, mf1 = stats()
    print(json.dumps({"alloc": a1 - a0, "free": f1 - f0, "mi_alloc": ma1 - ma0,
                      "mi_free": mf1 - mf0}))
""")


def test_a_run_frees_every_block_it_allocates():
    import json
    import os
    env = dict(os.environ, NUMBA_NRT_STATS="1")
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         env=env, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr[-3000:]
    d = json.loads(out.stdout.strip().splitlines()[-1])
    assert d["alloc"] > 1000                             # the second round did run
    # exact counts: an allocation is freed or it is not (no tolerance applies)
    assert d["alloc"] == d["free"], d
    assert d["mi_alloc"] == d["mi_free"], d


_CHILD_TREE = textwrap.dedent("""
    import json
    import numba as nb
    import numpy as np
    from numba.core.runtime import rtsys
    from gaussopt.multibody.io.mjcf import load
    import gaussopt.multibody.tree.tree_compiled as T

    @nb.njit
    def evaluate(p, q, v, M, F, A, b, out, count):
        z = p[:0]
        for _ in range(count):
            T.mass_force(p, q, v, z, M, F)
            T.rows(p, q, v, z, A, b, True)
            T.energy(p, q, v)
            T.recursive_step(p, q, v, out)

    counts = {}
    for path in ("tests/data/humanoid_tree.xml", "tests/data/four_bar_connect.xml",
                 "tests/data/arm6.urdf"):
        tree = load(path)
        n, m = int(tree._p[T.H_N]), int(tree._p[T.H_M])
        q, v = tree.initial_state()
        v = v + 0.3
        args = (tree._p, q, v, np.empty((n, n)), np.empty(n), np.empty((m, n)),
                np.empty(m), np.empty(T.out_size(n, m)))
        evaluate(*args, 1)                               # (compiled)
        s0 = rtsys.get_allocation_stats()
        evaluate(*args, 0)                               # (the call's own: its arguments)
        s1 = rtsys.get_allocation_stats()
        evaluate(*args, 100)
        s2 = rtsys.get_allocation_stats()
        counts[path] = [(s2.alloc - s1.alloc) - (s1.alloc - s0.alloc),
                        (s2.free - s1.free) - (s1.free - s0.free),
                        int(T.recursive_model(tree._p) is not None), int(tree._p[T.H_NE])]
    print(json.dumps(counts))
""")


def test_the_tree_kernel_allocates_one_buffer_per_call():
    """The tree kernel's entry points (joint coordinates: :mod:`gaussopt.multibody.tree`)
    take every temporary from one buffer per call (:func:`gaussopt.core.views.carve`):
    100 evaluations of ``M`` and ``F``, the rows, the energy and the recursive step
    allocate one block each, where the rows of a tree without closures and a recursive
    step refused for its closures allocate none, and free all of them. (Before: about 30
    blocks per evaluation of ``M`` and ``F``.)"""
    import json
    import os
    env = dict(os.environ, NUMBA_NRT_STATS="1")
    out = subprocess.run([sys.executable, "-c", _CHILD_TREE], capture_output=True, text=True,
                         env=env, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr[-3000:]
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    for path, (alloc, free, recursive, closures) in counts.items():
        # mass_force and energy: one each; rows: one with closures; the recursive step:
        # one where it applies (no closures)
        expected = 100 * (2 + (1 if closures else 0) + (1 if recursive else 0))
        assert alloc == expected, (path, alloc, expected)
        assert free == alloc, (path, free, alloc)
