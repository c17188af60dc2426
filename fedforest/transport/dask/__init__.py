"""Dask transport: fedforest's clients as Dask actors on the workers that hold their rows.

The only place fedforest imports Dask (``pip install "fedforest[dask]"``); importing
fedforest does not import it. Flower is not needed: the frames pack their arrays with
:mod:`fedforest.federated.codec`, which both transports share and which imports NumPy
only. See ``docs/scale.md``.
"""

from __future__ import annotations

try:
    import dask  # noqa: F401
    import distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fedforest.transport.dask needs Dask: pip install 'fedforest[dask]'."
    ) from exc

from .federation import DaskFederation

__all__ = ["DaskFederation"]
