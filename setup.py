"""Packaging beyond pyproject.toml: the top-level migrations/ and openapi/ ship inside the package.

They stay where a developer looks for them (beside app/), and install as `app._migrations` and
`app._openapi`, where `app.migrate` and `app.openapi_docs` find them through importlib.resources,
whether the package runs from a wheel, an editable install or the source tree.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["app", "app.*"]), "app._migrations", "app._openapi"],
    package_dir={"app._migrations": "migrations", "app._openapi": "openapi"},
    package_data={
        "app": [
            "py.typed",
            "templates/*.html",
            "templates/*.css",
            "templates/*/*.html",
            "templates/*/*.js",
            "templates/*/*.css",
            "templates/*/*.atom",
            # The console's sections (templates/console/feeds/, ...).
            "templates/*/*/*.html",
        ],
        "app._migrations": ["script.py.mako", "versions/*.py"],
        "app._openapi": ["*.yaml"],
    },
)
