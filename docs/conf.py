"""Sphinx configuration of gaussopt's documentation.

Build (no network needed)::

    python3 -m pip install ".[docs]"
    python3 -m sphinx -W --keep-going -b html docs docs/_build/html

The API reference is generated from the numpydoc docstrings at build time
(autosummary writes its stubs into ``docs/api/generated/``, gitignored); the
notebooks of ``notebooks/`` are copied into ``docs/notebooks/`` (gitignored) and
rendered by myst-nb without executing them (the test suite executes them:
``tests/test_notebooks.py``).
"""

import os
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# the gaussopt of this source tree, not an installed one
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("GAUSSOPT_QUIET", "1")

import gaussopt  # noqa: E402


def _copy_notebooks() -> None:
    """notebooks/*.ipynb -> docs/notebooks/ (only the changed ones, so that an
    incremental build does not re-read the others)."""
    dst = DOCS / "notebooks"
    dst.mkdir(exist_ok=True)
    wanted = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    for old in dst.glob("*.ipynb"):
        if old.name not in wanted:
            old.unlink()
    for src in sorted((ROOT / "notebooks").glob("*.ipynb")):
        out = dst / src.name
        if not out.exists() or out.read_bytes() != src.read_bytes():
            shutil.copyfile(src, out)


_copy_notebooks()

project = "gaussopt"
author = "The gaussopt authors"
copyright = "2026, The gaussopt authors"
version = release = gaussopt.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",  # Markdown pages (myst-parser) and notebooks
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# -- autodoc / autosummary ---------------------------------------------------------
autosummary_generate = True          # stubs written at build time into api/generated/
autosummary_generate_overwrite = True
autosummary_imported_members = False
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"           # the numpydoc Parameters sections carry the types
autodoc_inherit_docstrings = True

# -- numpydoc ----------------------------------------------------------------------
numpydoc_show_class_members = False  # the class template lists the members itself
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()   # markup is checked by the build (-W), not style

# -- MyST / myst-nb ----------------------------------------------------------------
nb_execution_mode = "off"            # notebooks are rendered as stored; tests execute them
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3             # [text](page.md#a-heading) links resolve

# -- HTML --------------------------------------------------------------------------
html_theme = "furo"
html_title = f"gaussopt {release}"
html_static_path: list = []

# -- the public names of each namespace, from its __all__ ---------------------------
#: the public namespaces: one page each (api/index.rst), listing the names of their
#: ``__all__`` (so a name added there is documented without editing the docs)
NAMESPACES = ["gaussopt", "gaussopt.multibody", "gaussopt.multibody.spatial",
              "gaussopt.symbolic", "gaussopt.quasi", "gaussopt.plotting"]


def _groups(fullname: str) -> list:
    """``[(title, objects, submodules, aliases, notes), ...]`` of a namespace's ``__all__``
    (rendered by ``_templates/autosummary/namespace.rst``): the flat API's groups are the
    comment lines of its ``__all__`` (``# one step``); ``aliases`` are the names whose
    object the flat API documents already (one page per object); ``notes`` the dunder
    names (``__version__``), shown with their value."""
    import importlib
    import inspect

    mod = importlib.import_module(fullname)
    if fullname == "gaussopt":
        src = (ROOT / "gaussopt" / "__init__.py").read_text()
        body = re.search(r"^__all__ = \[\n(.*?)^\]", src, re.S | re.M).group(1)
        parts = re.split(r"^\s*#\s*(.*)$", body, flags=re.M)
        titled = [(parts[i].strip(), re.findall(r'"([^"]+)"', parts[i + 1]))
                  for i in range(1, len(parts), 2)]
        named = {n for _, names in titled for n in names}
        assert named == set(mod.__all__), "gaussopt.__all__: a name outside the commented groups"
    else:
        titled = [("", list(mod.__all__))]
    out = []
    for title, names in titled:
        objects, modules, aliases, notes = [], [], [], []
        for n in names:
            obj = getattr(mod, n)
            if n.startswith("_"):
                notes.append(f"``{fullname}.{n}``: {obj!r}")
            elif inspect.ismodule(obj):
                modules.append(n)
            elif fullname != "gaussopt" and getattr(gaussopt, n, None) is obj:
                # one page per object: a class of two namespaces would be described twice
                aliases.append(f"gaussopt.{n}")
            else:
                objects.append(n)
        out.append((title[:1].upper() + title[1:], objects, modules, aliases, notes))
    return out


autosummary_context = {"public": {name: _groups(name) for name in NAMESPACES}}
