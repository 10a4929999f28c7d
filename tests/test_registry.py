"""Problems through entry points (gaussopt.study.registry), documented ranges, and the import
graph: the library imports neither its command line nor the `problems` package."""

from __future__ import annotations

import ast
import importlib.metadata
import math
from pathlib import Path

import pytest

import gaussopt as go
from gaussopt.study.cli import main
from gaussopt.study.problem import BuildParameter
from gaussopt.study.registry import (GROUP, check_parameters, get_problem, load_problem_module,
                                     parameter_range, problem_names, UsageError)

ROOT = Path(__file__).resolve().parents[1]


def _fake_distribution(site: Path, name: str, entries: dict) -> None:
    """A ``<name>-1.0.dist-info`` in ``site`` registering ``entries`` (name -> module)
    under gaussopt.problems: what `pip install` of a third-party package leaves."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))


THIRD_PARTY = '''"""A pendulum from another package, registered through its entry point."""

from gaussopt_problems import pendulum


def build(l: float = 1.0, t_end: float = 0.2):
    """The pendulum of gaussopt's problems, shorter.

    Parameters
    ----------
    l : float, > 0
        Length of the rod [m].
    t_end : float, > 0
        End time [s].
    """
    return pendulum.build(l=l, t_end=t_end)
'''


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A directory on sys.path (and on the workers' PYTHONPATH) for fake packages."""
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    return d


def test_every_problem_module_is_registered_in_pyproject():
    tomllib = pytest.importorskip("tomllib")
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]
    modules = sorted(p.stem for p in (ROOT / "problems").glob("*.py") if not p.stem.startswith("_"))
    assert table == {m: f"gaussopt_problems.{m}" for m in modules}


def test_every_package_of_the_tree_is_installed():
    """pyproject lists the packages (the problems are installed under another name, so
    setuptools' automatic discovery cannot be used): a package added to the tree must be
    added there, or an installed gaussopt lacks it."""
    tomllib = pytest.importorskip("tomllib")
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    tree = sorted(".".join(d.parent.relative_to(ROOT).parts)
                  for d in (ROOT / "gaussopt").rglob("__init__.py"))
    assert sorted(setup["packages"]) == sorted(tree + ["gaussopt_problems"])
    assert setup["package-dir"] == {"gaussopt_problems": "problems"}


def test_installed_problems_are_found_by_entry_point():
    # (the installed metadata must carry pyproject's entry points: reinstall after changing them)
    names = problem_names()
    assert "four_bar" in names and names == sorted(names)
    mod = get_problem("four_bar")
    assert mod.__name__ == "gaussopt_problems.four_bar" and callable(mod.build)
    assert load_problem_module("four_bar") is mod


def test_third_party_problem_through_a_distribution(site, capsys, monkeypatch):
    (site / "thirdparty_pendulum.py").write_text(THIRD_PARTY)
    _fake_distribution(site, "thirdparty", {"short_pendulum": "thirdparty_pendulum"})
    assert "short_pendulum" in problem_names() and "four_bar" in problem_names()
    assert get_problem("short_pendulum").__name__ == "thirdparty_pendulum"
    # the command line lists it and runs it; its documented range is checked
    assert main(["list"]) == 0
    assert "short_pendulum           A pendulum from another package" in capsys.readouterr().out
    assert main(["run", "short_pendulum", "--param", "l=0.5"]) == 0
    capsys.readouterr()
    assert main(["run", "short_pendulum", "--param", "l=-1"]) == 2
    assert "`l` of short_pendulum must be > 0" in capsys.readouterr().err
    # and go.sweep takes it by name, like gaussopt's own
    res = go.sweep("short_pendulum", {"l": [0.5, 2.0]}, workers=1, progress=False)
    assert [r["success"] for r in res.rows] == [True, True] and res.problem == "short_pendulum"
    with pytest.raises(go.ModelError, match=r"`params`: `l` of short_pendulum must be > 0 "
                                            r"\(the range its build\(\) documents\), found 0.0"):
        go.sweep("short_pendulum", {"l": [1.0, 0.0]}, workers=1, progress=False)


def test_same_name_from_two_distributions_is_an_error(site):
    (site / "other_four_bar.py").write_text(THIRD_PARTY)
    _fake_distribution(site, "rival", {"four_bar": "other_four_bar"})
    with pytest.raises(go.ModelError, match=r"'four_bar' is registered by several distributions "
                                            r"with different modules: .*rival \(other_four_bar\)"):
        get_problem("four_bar")
    # the same module registered twice (an installed and a development copy) is one problem
    _fake_distribution(site, "devcopy", {"four_bar": "gaussopt_problems.four_bar"})
    (site / "rival-1.0.dist-info" / "entry_points.txt").write_text(f"[{GROUP}]\n")
    importlib.invalidate_caches()
    assert get_problem("four_bar").__name__ == "gaussopt_problems.four_bar"


def test_broken_third_party_problem_is_named_and_list_goes_on(site, capsys):
    (site / "broken_problem.py").write_text("import no_such_module_anywhere\n")
    _fake_distribution(site, "brokenpkg", {"broken": "broken_problem"})
    with pytest.raises(go.ModelError, match=r"the problem 'broken' registered by brokenpkg "
                                            r"\(broken_problem\) cannot be imported: "
                                            r"ModuleNotFoundError"):
        get_problem("broken")
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "broken                   (cannot be loaded: the problem 'broken'" in out
    assert "four_bar" in out
    with pytest.raises(UsageError, match="cannot be imported"):
        load_problem_module("broken")


def test_no_problems_registered_says_to_reinstall(monkeypatch, capsys):
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    with pytest.raises(go.ModelError, match=r"unknown problem 'four_bar': no problems are "
                                            r"registered .*reinstall it \(`pip install -e \.`"):
        get_problem("four_bar")
    with pytest.raises(go.ModelError, match="no problems are registered"):
        go.sweep("four_bar", {"psi": [1.0]})
    assert main(["list"]) == 2
    assert "no problems are registered" in capsys.readouterr().err
    assert main(["run", "four_bar"]) == 2
    assert "reinstall" in capsys.readouterr().err


@pytest.mark.parametrize("typ, inside, outside, text", [
    ("float, > 0", [1e-300, 5.0], [0.0, -1.0, math.nan, math.inf], "> 0"),
    ("int, >= 1", [1, 7], [0, -3], ">= 1"),
    ("float, >= 0, < 1, default 0.5", [0.0, 0.5], [1.0, -1e-9], ">= 0, < 1"),
    ("float, in (0, 1]", [1.0, 1e-9], [0.0, 1.5], "in (0, 1]"),
    ("float, != 0", [-1.0, 2.0], [0.0], "!= 0"),
])
def test_documented_ranges(typ, inside, outside, text):
    p = BuildParameter("x", 1.0, typ, "A quantity [m].")
    rng = parameter_range(p)
    assert rng.text == text
    assert all(rng.contains(v) for v in inside) and not any(rng.contains(v) for v in outside)


def test_undocumented_range_and_non_numbers_are_not_checked():
    assert parameter_range(BuildParameter("x", 1.0, "float", "[m]")) is None
    assert parameter_range(BuildParameter("x", 1.0, "float, default 1", "[m]")) is None
    from gaussopt.study.problem import BuildSignature

    def build(m: float = 1.0, v0=(1, 0, 2), name: str = "a"):
        """A build().

        Parameters
        ----------
        m : float, > 0
            Mass [kg].
        v0 : sequence of 3 floats, > 0
            Velocity [m/s].
        name : str
            A name.
        """

    sig = BuildSignature.of(build)
    check_parameters(sig, {"m": 2.0, "v0": (1, 0, 2), "name": "b", "other": -1}, "p")
    with pytest.raises(go.ModelError, match=r"`m` of p must be > 0 .*found -2"):
        check_parameters(sig, {"m": -2}, "p")
    with pytest.raises(go.ModelError, match=r"`m` of p must be > 0 and finite .*found inf"):
        check_parameters(sig, {"m": math.inf}, "p")


# --------------------------------------------------------------------------- the house
def _import_graph() -> tuple[dict, list]:
    """Edges between gaussopt's modules (every import statement, also inside functions),
    and the imports of `problems` or gaussopt.study.cli by other library modules."""
    mods = {}
    for f in sorted((ROOT / "gaussopt").rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    graph, upward = {}, []
    for mod, f in mods.items():
        base = mod.split(".") if f.name == "__init__.py" else mod.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                prefix = (".".join(base[:len(base) - node.level + 1]
                                   + ([node.module] if node.module else []))
                          if node.level else node.module)
                names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in mods else prefix
                         for a in node.names]
            for name in names:
                if name.split(".")[0] == "problems" or (
                        name.startswith("gaussopt.study.cli") and mod != "gaussopt.study.cli"):
                    upward.append((mod, name, node.lineno))
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if name and name != mod:
                    deps.add(name)
        graph[mod] = deps
    return graph, upward


def _reaches(graph: dict, a: str, b: str) -> bool:
    seen, todo = set(), [a]
    while todo:
        v = todo.pop()
        if v == b:
            return True
        if v not in seen:
            seen.add(v)
            todo += graph.get(v, ())
    return False


def test_library_imports_neither_its_command_line_nor_the_problems():
    graph, upward = _import_graph()
    assert upward == []
    # the command line, the sweep and the registry are in no import cycle
    for mod in ("gaussopt.study.cli", "gaussopt.study.sweep", "gaussopt.study.registry"):
        back = [d for d in graph[mod] if _reaches(graph, d, mod)]
        assert back == [], (mod, back)
    assert "gaussopt.study.cli" not in graph["gaussopt.study.sweep"]
    assert {"gaussopt.study.registry"} <= graph["gaussopt.study.sweep"] & graph["gaussopt.study.cli"]


def test_no_module_of_the_library_is_in_an_import_cycle():
    """Every import counts (at module level, inside functions, for type checking): a
    module that reaches itself through its imports is named with the way back."""
    graph, _ = _import_graph()
    cycles = [(mod, dep) for mod, deps in graph.items() for dep in deps
              if _reaches(graph, dep, mod)]
    assert cycles == []


#: the packages of the library by role, lowest first: a module imports only from its own
#: package or from packages of a lower rank (the front ends and the quasi-velocity run
#: share a rank and import none of each other)
LAYERS = {"core": 0, "model": 1, "gauss": 2, "integrate": 3,
          "symbolic": 4, "multibody": 4, "quasi": 4, "study": 5}


def test_data_flows_downward_through_the_packages():
    """``study -> front ends / quasi -> integrate -> gauss -> model -> core``: every import
    of a library module goes to its own package or down (the flat API ``gaussopt`` is the
    top and nothing imports it), and every package of the tree has its rank."""
    graph, _ = _import_graph()
    packages = {mod.split(".")[1] for mod in graph if mod.count(".") >= 1}
    assert packages == set(LAYERS), packages

    def rank(mod: str) -> tuple:
        parts = mod.split(".")
        return (len(LAYERS), "") if len(parts) == 1 else (LAYERS[parts[1]], parts[1])

    upward = [(mod, dep) for mod, deps in graph.items() for dep in deps
              if rank(dep)[0] > rank(mod)[0]
              or (rank(dep)[0] == rank(mod)[0] and rank(dep)[1] != rank(mod)[1])]
    assert upward == []


def test_the_top_level_holds_packages_and_the_flat_api_only():
    """No module beside ``__init__.py`` at gaussopt's top level, and no two modules of the
    library share a file name (but ``__init__.py`` and the parallel planar / spatial
    modules of the multibody front end, which hold the same role for each kind of body)."""
    top = sorted(p.name for p in (ROOT / "gaussopt").glob("*.py"))
    assert top == ["__init__.py"]
    names: dict = {}
    for f in (ROOT / "gaussopt").rglob("*.py"):
        if f.name != "__init__.py":
            names.setdefault(f.name, []).append(str(f.parent.relative_to(ROOT)))
    shared = {k: sorted(v) for k, v in names.items() if len(v) > 1}
    parallel = ["gaussopt/multibody/planar", "gaussopt/multibody/spatial"]
    assert all(v == parallel for v in shared.values()), shared
