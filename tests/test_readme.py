"""Every Python block of the README runs when pasted (in order, one namespace), the
numbers it prints agree with independent references within derived bounds, its links
to the documentation resolve, and CI runs the commands it gives. (The user guide moved
to docs/: tests/test_docs.py runs its pages and checks their numbers.)"""

import math
import re
from pathlib import Path

import numpy as np
from scipy.special import ellipk

from test_trajectory import integration_bound

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _number(out: str, label: str) -> float:
    m = re.search(re.escape(label) + r"\s*([-+0-9.eE]+)", out)
    assert m, f"{label!r} not printed:\n{out}"
    return float(m.group(1).rstrip("."))


def test_readme_python_blocks_run(monkeypatch, capsys):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 1
    ns: dict = {}
    runs = {}
    for code in blocks:
        exec(compile(code, str(README), "exec"), ns)
        if "period" in code and "pendulum" in code:
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


def test_readme_links_resolve():
    """Relative links (docs/*.md, LICENSE, ...) point at files of the repository, and
    their #anchors at headings of the page (GitHub's slugs, as MyST makes them)."""
    text = README.read_text()
    links = re.findall(r"\]\(([^)\s:]+)\)", text)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        path, _, anchor = link.partition("#")
        assert (ROOT / path).exists(), link
        if anchor:
            headings = re.findall(r"^#+ (.*)$", (ROOT / path).read_text(), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
            assert anchor in slugs, (link, sorted(slugs))


def test_ci_runs_the_readme_commands():
    """.ci/run installs exactly as the README says, runs its test command and builds the
    documentation with its command (warnings as errors)."""
    readme = README.read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert len(commands) == 3
    for command in commands:
        if "gaussopt compare" in command:
            continue            # the main job: tests/test_cli.py runs `compare four_bar`
        for part in command.strip().split(" && "):
            assert part in ci, f"{part!r} is not a line of .ci/run"
