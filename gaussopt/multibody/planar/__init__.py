"""Planar bodies in body coordinates ``(x, y, phi)``: elements, their tables, the compiled
model functions and the :class:`Model` (re-exported by :mod:`gaussopt.multibody`)."""
