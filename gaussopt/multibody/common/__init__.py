"""What planar and spatial multibody models share: the rank report and joint reactions
(:mod:`~gaussopt.multibody.common.analysis`) and consistent initial states
(:mod:`~gaussopt.multibody.common.states`)."""
