"""Every Python block of the README runs when pasted (in order, one namespace)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(monkeypatch, capsys):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 4
    ns: dict = {}
    for code in blocks:
        exec(compile(code, str(README), "exec"), ns)
    out = capsys.readouterr().out
    assert "period 2.6367222" in out                      # the pendulum example
    assert "crank angle at 2 s: 0.445989860" in out       # the slider-crank example
