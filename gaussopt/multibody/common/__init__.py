"""What planar and spatial multibody models share: the compiled model functions of every
kind, made from one set of templates (:mod:`~gaussopt.multibody.common.cfuncs`), the
assembly's tables and their evaluation (:mod:`~gaussopt.multibody.common.base_assembly`),
the model's lookups, joint equations and assembled system
(:mod:`~gaussopt.multibody.common.base_model`), the rank report and joint reactions
(:mod:`~gaussopt.multibody.common.analysis`) and consistent initial states
(:mod:`~gaussopt.multibody.common.states`)."""
