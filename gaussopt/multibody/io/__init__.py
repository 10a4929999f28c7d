"""Models from files: MJCF and URDF (through MuJoCo's parser), :func:`~gaussopt.multibody.load`."""
