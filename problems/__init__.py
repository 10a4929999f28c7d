"""Published and benchmark problems; each module exposes ``build(**params) -> Problem``.

They reach gaussopt through the entry points of the group ``gaussopt.problems``
(``pyproject.toml``), as the problems of any other package do
(:mod:`gaussopt.study.registry`); gaussopt's library never imports this package by name.
"""
