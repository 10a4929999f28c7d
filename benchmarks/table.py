"""The rows of a benchmark table, shared by the benchmark scripts (run.py, robots.py):
each row is gaussopt's number and accuracy beside the peer's, with their ratio."""

from __future__ import annotations

import timeit

import numpy as np

ROWS: list[dict] = []


def add(measure, ours, ours_acc, peer, peer_val, peer_acc, target="", unit="us"):
    """One row of the table (``None``: not measured / not available)."""
    ratio = ours / peer_val if (ours is not None and peer_val) else None
    ROWS.append(dict(measure=measure, ours=ours, ours_acc=ours_acc, peer=peer,
                     peer_val=peer_val, peer_acc=peer_acc, ratio=ratio, target=target,
                     unit=unit))
    print(f"  {measure}: gaussopt {_f(ours)} {unit} (acc {_f(ours_acc, '.1e')}) | {peer} "
          f"{_f(peer_val)} {unit} (acc {_f(peer_acc, '.1e')}) | ratio {_f(ratio, '.2f')}",
          flush=True)


def _f(x, spec=".3g"):
    return "n/a" if x is None else format(x, spec)


def median_us(fn, repeat, number):
    """Median microseconds per call of ``fn`` over ``repeat`` batches of ``number`` calls."""
    return float(np.median(timeit.repeat(fn, number=number, repeat=repeat))) / number * 1e6
