"""Dask transport: fedforest's clients as Dask actors on the workers that hold their rows.

The only place fedforest imports Dask (``pip install "fedforest[dask,flower]"``: the
frames reuse the Flower transport's array codec, which imports Flower); importing
fedforest does not import it. See ``docs/scale.md``.
"""

from __future__ import annotations

try:
    import dask  # noqa: F401
    import distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fedforest.transport.dask needs Dask: pip install 'fedforest[dask]'."
    ) from exc
try:
    # The frames reuse the Flower transport's array codec (pack_arrays / unpack_arrays),
    # which lives beside Flower's records and imports Flower.
    import flwr  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fedforest.transport.dask encodes its messages with the Flower transport's codec, "
        "which needs Flower installed: pip install 'fedforest[dask,flower]'."
    ) from exc

from .federation import DaskFederation

__all__ = ["DaskFederation"]
