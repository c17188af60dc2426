"""Names of a package loaded on first use (PEP 562): its ``__getattr__`` and ``__dir__``.

``fedforest``, ``fedforest.datasets``, ``fedforest.transport`` and its ``flower`` package
load their public names only when they are read, so that a process needing one piece (a
Flower ClientApp, a client's file reader) imports no more than that piece. Nothing is
imported here but ``importlib``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    namespace: dict[str, Any], where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``, given its ``globals()``.

    ``where`` maps each lazily loaded name to the module that defines it, relative to the
    package (``".forest"``). A name is imported on its first read and kept in
    ``namespace``, so later reads find it there; ``__dir__`` lists the loaded names and
    the package's ``__all__`` once each.
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name], package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
