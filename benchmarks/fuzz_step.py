"""Accuracy of the step solvers on the random case families of ``tests/reference_step.py``.

Run: ``python3 benchmarks/fuzz_step.py [--cases N] [--jobs J] [--solvers ...]``.

Every case (``N`` per random family, default 400, plus the 4 literal issue
cases) is solved by each solver on a fresh ``System`` and compared with the
50-digit reference, which follows the documented rank decision. Printed per
family and solver:

* ``cases``, ``worst err`` (relative 2-norm error of ``a``) and
  ``worst err/(eps kappa)`` (``kappa`` the condition estimate of the
  reference module; a backward-stable double-precision solver stays below
  ``C = 10 (n + m)``, i.e. 20..240);
* ``>bound``: cases above the acceptable error (``C eps kappa``; for the QP
  ``max(C eps kappa, 1e-12 kappa)``);
* ``>1e-3``: cases with a relative error above 1e-3, unambiguously wrong
  (every case has a bound ``C eps kappa <= 1e-4``);
* ``>kkt``: cases above the looser bound with ``kappa_kkt`` (``cond(K) |x| / |a|
  / s_r``, the reduced KKT estimate) in place of ``kappa``: the failures that
  remain when F's size is charged to every case;
* ``rank!=``: cases whose ``info["rank"]`` differs from the reference rank
  (a missing key counts);
* ``exceptions``: raised exceptions by type (every case is determinate and
  consistent, so any exception is a failure to solve it).

``nullspace64`` is not a gaussopt solver: it is the plain float64 null-space
method of the reference module, the baseline showing that the bound is
attainable in double precision. BLAS is limited to one thread per worker.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import reference_step as rs  # noqa: E402


def _run_chunk(args):
    """Generate and evaluate cases ``seeds`` of ``family``; plain records (picklable)."""
    family, seeds, solvers, kind = args
    out = []
    for seed in seeds:
        case, ref = rs.generate(family, seed)
        for solver in solvers:
            ev = rs.evaluate(case, ref, solver, kind)
            exc = ev.exception
            out.append({
                "family": family, "solver": solver, "case": repr(case), "n": case.n, "m": case.m,
                "err": ev.err, "ratio": ev.ratio, "bound": ev.bound, "above": ev.above,
                "above_kkt": ev.exception is None
                and not ev.err <= rs.error_bound(case, ref, solver, "kkt"),
                "rank": ev.rank, "ref_rank": ref.rank, "rank_ok": ev.rank_ok,
                "exc": None if exc is None else type(exc).__name__,
                "exc_msg": None if exc is None else str(exc)[:200],
                "kappa": ref.kappa, "kappa_kkt": ref.kappa_kkt, "norm_a": ref.norm_a,
                "summary": ref.summary(),
            })
    return out


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.2e}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=400, help="cases per random family (default 400)")
    p.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--solvers", nargs="+", default=list(rs.SOLVERS),
                   help="gaussopt solver names (default closed_form lagrange qp)")
    p.add_argument("--no-baseline", action="store_true", help="omit the nullspace64 baseline")
    p.add_argument("--families", nargs="+", default=list(rs.FAMILIES), choices=list(rs.FAMILIES))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--kappa", choices=("refined", "kkt"), default="refined",
                   help="condition estimate of the bound (default refined: Reference.kappa)")
    p.add_argument("--worst", type=int, default=2,
                   help="print this many worst failing cases per family x solver (default 2)")
    args = p.parse_args(argv)

    solvers = list(args.solvers) + ([] if args.no_baseline else ["nullspace64"])
    tasks = []
    for fam in args.families:
        if fam == "issue":
            seeds = list(range(4))
        else:
            seeds = list(range(args.start, args.start + args.cases))
        chunk = max(1, len(seeds) // (4 * max(args.jobs, 1)))
        tasks += [(fam, seeds[i:i + chunk], solvers, args.kappa) for i in range(0, len(seeds), chunk)]
    t0 = time.perf_counter()
    records = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for part in pool.map(_run_chunk, tasks):
                records += part
    else:
        for task in tasks:
            records += _run_chunk(task)
    elapsed = time.perf_counter() - t0

    cells = defaultdict(list)
    for rec in records:
        cells[(rec["family"], rec["solver"])].append(rec)
    import gaussopt

    ncases = len({(r["family"], r["case"]) for r in records})
    print(f"gaussopt from {Path(gaussopt.__file__).resolve().parent}; {ncases} cases, "
          f"{len(records)} solves, {elapsed:.0f} s with {args.jobs} worker(s)")
    print(f"bound: C eps kappa with C = 10 (n+m), kappa = {args.kappa}; "
          "qp: max(C eps kappa, 1e-12 kappa)\n")
    head = (f"{'family':15s} {'solver':12s} {'cases':>5s} {'worst err':>10s} "
            f"{'err/(eps k)':>11s} {'>bound':>6s} {'>kkt':>5s} {'>1e-3':>5s} {'rank!=':>6s}  exceptions")
    print(head)
    print("-" * len(head))
    details = []
    for fam in args.families:
        for solver in solvers:
            recs = cells.get((fam, solver), [])
            if not recs:
                continue
            ok = [r for r in recs if r["exc"] is None]
            worst_err = max((r["err"] for r in ok), default=math.nan)
            worst_ratio = max((r["ratio"] for r in ok), default=math.nan)
            above = [r for r in ok if r["above"]]
            wrong = [r for r in ok if not r["err"] <= 1e-3]
            above_kkt = [r for r in ok if r["above_kkt"]]
            rank_bad = [r for r in ok if not r["rank_ok"]]
            excs = Counter(r["exc"] for r in recs if r["exc"] is not None)
            exc_txt = ", ".join(f"{k}: {v}" for k, v in excs.most_common()) or "-"
            print(f"{fam:15s} {solver:12s} {len(recs):5d} {_fmt(worst_err):>10s} "
                  f"{_fmt(worst_ratio):>11s} {len(above):6d} {len(above_kkt):5d} {len(wrong):5d} {len(rank_bad):6d}  {exc_txt}")
            bad = sorted(above, key=lambda r: -r["err"] / r["bound"])[:args.worst]
            bad += [r for r in recs if r["exc"] is not None][:args.worst]
            bad += [r for r in rank_bad if r not in bad][:args.worst]
            for r in bad:
                what = (f"raised {r['exc']}: {r['exc_msg']}" if r["exc"] else
                        f"err={r['err']:.3g} bound={r['bound']:.3g} "
                        f"err/(eps kappa)={r['ratio']:.3g} rank={r['rank']} (ref {r['ref_rank']})")
                details.append(f"{fam}/{solver}: {r['case']} [{r['summary']}]: {what}")
        print()
    # condition statistics of the families
    print(f"{'family':15s} {'median kappa':>12s} {'max kappa':>10s} {'max kappa_kkt':>13s} "
          f"{'min |a|':>9s} {'max |a|':>9s}")
    for fam in args.families:
        recs = [r for r in cells.get((fam, solvers[0]), [])]
        if not recs:
            continue
        k = sorted(r["kappa"] for r in recs)
        print(f"{fam:15s} {_fmt(k[len(k) // 2]):>12s} {_fmt(k[-1]):>10s} "
              f"{_fmt(max(r['kappa_kkt'] for r in recs)):>13s} "
              f"{_fmt(min(r['norm_a'] for r in recs)):>9s} {_fmt(max(r['norm_a'] for r in recs)):>9s}")
    if details:
        print("\nworst failing cases (rebuild with reference_step.make_case(...)):")
        for line in details:
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
