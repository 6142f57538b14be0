"""Package discovery for setuptools, the one thing pyproject.toml cannot say: every package under
openprogram/ is found (a new subpackage ships without anyone listing it), and the notebook layer in
the top-level widgets/ folder is installed as `openprogram.widgets` (never as a top-level
`widgets`). Everything else about the distribution is in pyproject.toml."""
from setuptools import find_packages, setup

WIDGETS = ["openprogram.widgets", *("openprogram.widgets." + name
                                    for name in find_packages("widgets"))]

setup(
    packages=[*find_packages(include=["openprogram", "openprogram.*"]), *WIDGETS],
    package_dir={"openprogram.widgets": "widgets"},
)
