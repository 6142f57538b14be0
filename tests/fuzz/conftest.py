"""Hypothesis profiles for the fuzz tests.

`ci` (the default) is derandomized: every run tries the same examples, so a failure in CI is a
failure on any machine, and no example database is written or committed. `OPENPROGRAM_FUZZ=long`
selects `long`: random examples, many more of each property (scaled further by
OPENPROGRAM_FUZZ_SCALE), for a run by hand; add `--hypothesis-show-statistics` to see how many
examples each property tried. (The profile is chosen here, by the environment, rather than with
`--hypothesis-profile`, which this module would override when pytest collects it.)
"""
import os

from hypothesis import Phase, settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("long", derandomize=False, database=None, deadline=None,
                          print_blob=True)
# OPENPROGRAM_FUZZ=dev: the CI examples without shrinking, to see a failure at once
settings.register_profile("dev", parent=settings.get_profile("ci"),
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile(os.environ.get("OPENPROGRAM_FUZZ") or "ci")
