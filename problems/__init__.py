"""Published and benchmark problems; each module exposes ``build(**params) -> Problem``."""
