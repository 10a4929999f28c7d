"""What a user describes and never solves: the system, its constraints and contacts.

:mod:`~gaussopt.model.system` (:class:`~gaussopt.System`: ``M``, ``F``, the
constraints), :mod:`~gaussopt.model.constraints` (every kind of constraint, brought to
the acceleration level) and :mod:`~gaussopt.model.contact` (:class:`~gaussopt.Contact`,
unilateral points with restitution and friction).
"""
