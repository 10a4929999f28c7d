"""Test-session settings shared by every test file.

Hypothesis draws its examples from a seed fixed per test (``derandomize``): the README's
test command runs the same examples on every machine and every run, so a result never
depends on which random examples a run happened to draw. (Explore beyond them with
``HYPOTHESIS_PROFILE=explore python3 -m pytest ...``.)
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
