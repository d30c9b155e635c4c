"""Every module of the four packages, for the tests that walk them all (class names, the error tree)."""

from __future__ import annotations

import pkgutil

import core
import demo
import replay
import serve


def project_modules() -> list[str]:
    """The dotted names of `core`, `serve`, `replay`, `demo` and every module below them (not `__main__`,
    which runs a CLI when imported)."""
    names = []
    for package in (core, serve, replay, demo):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
            if not info.name.endswith("__main__"):
                names.append(info.name)
    return names
