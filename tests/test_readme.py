"""Every Python block of the README runs when pasted (in order, one namespace), and
the numbers it prints agree with independent references within derived bounds."""

import math
import re
from pathlib import Path

import numpy as np
from scipy.special import ellipk

from test_trajectory import flow_growth, integration_bound

README = Path(__file__).resolve().parents[1] / "README.md"


def _number(out: str, label: str) -> float:
    m = re.search(re.escape(label) + r"\s*([-+0-9.eE]+)", out)
    assert m, f"{label!r} not printed:\n{out}"
    return float(m.group(1).rstrip("."))


def test_readme_python_blocks_run(monkeypatch, capsys):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 4
    ns: dict = {}
    runs = {}
    for code in blocks:
        exec(compile(code, str(README), "exec"), ns)
        if "crank angle at 2 s" in code:
            runs["slider"] = ns["traj"]
        if "period" in code and "pendulum" in code and "slider" not in runs:
            runs.setdefault("pendulum", ns["traj"])
    out = capsys.readouterr().out

    # the pendulum's period against 4 sqrt(l/g) K(sin^2(th0/2)): the README prints 8
    # decimals (rounding 5e-9) of twice a root located by linear interpolation of v_x
    # between samples 1e-4 s apart at rtol = atol = 1e-12. Error of the root: the state
    # error there over |a_x| (integration_bound, the flow's growth over 3 s is below 10:
    # test_pendulum measures 2.5 over 1.6 s; 10 covers the rest of the swing) plus the
    # interpolation error h^2/8 max|v_x''| / |a_x| (|v_x''| <= |a_x'| ~ g sqrt(g/l) ~ 25).
    T = _number(out, "period")
    tr = runs["pendulum"]
    l, g, th0 = 1.5, 9.81, math.radians(60)
    T_exact = 4 * math.sqrt(l / g) * ellipk(math.sin(th0 / 2) ** 2)
    i = np.flatnonzero((tr.v[:-1, 0] < 0) & (tr.v[1:, 0] >= 0))[0]
    ax = min(abs(tr.a[i, 0]), abs(tr.a[i + 1, 0]))
    h = tr.t[i + 1] - tr.t[i]
    root = (10 * integration_bound(tr, dense=True) + h**2 / 8 * 25.0) / ax
    assert abs(T - T_exact) <= 5e-9 + 2 * root, (T, T_exact, root)

    # the slider-crank's crank angle at 2 s against gaussopt_problems.slider_crank's reduced
    # one-DOF ODE (DOP853 at 1e-13): the bound of the run's global error with the growth
    # of the reduced flow (flow_growth), plus the reference's own error; the README
    # prints the value to 6 decimals (rounding 5e-7)
    from gaussopt_problems import slider_crank as sc

    th = _number(out, "crank angle at 2 s:")
    tr = runs["slider"]
    ts = np.linspace(0.0, 2.0, 81)
    growth = flow_growth(lambda y, t: sc.reference(t, th0=y[0], w0=y[1]), [np.pi / 6, 0.0], ts)
    bound = integration_bound(tr, growth, ref_tol=1e-13)
    assert abs(th - sc.reference(2.0)[0, 0]) <= 5e-7 + bound, (th, bound)
