"""The wheel carries what a run needs besides harness/: the suites (a package, with suites/expected.yaml), the
example profiles and the manifests (as harness.bundled.*; harness/core/paths.py finds them there when gpupoc is
installed rather than run from a checkout) and the record's templates. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

BUNDLED = {"harness.bundled.profiles": "profiles", "harness.bundled.manifests": "manifests"}

setup(
    packages=find_packages(include=["harness*", "suites*"]) + list(BUNDLED),
    package_dir=BUNDLED,
    package_data={"harness": ["record/templates/*.j2"], "suites": ["expected.yaml", "releases.yaml"],
                  **{name: ["*.yaml", "*/*.yaml", "*/*.j2"] for name in BUNDLED}},
)
