"""Flower transport: fedforest's server in a ServerApp, its clients in ClientApps.

The only place fedforest imports Flower (``pip install "fedforest[flower]"``). The
components of a Flower app (``[tool.flwr.app.components]``) are
``fedforest.transport.flower.serverapp:app`` and
``fedforest.transport.flower.clientapp:app``; see ``docs/flower.md``.

The names below load on first use: a SuperNode starts a ClientApp process for every
message, and that process should not import the server side (the estimators).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names as _lazy_names

try:
    import flwr  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fedforest.transport.flower needs Flower: pip install 'fedforest[flower]'."
    ) from exc

if TYPE_CHECKING:
    from ._data import client_from_node_config, read_client_data
    from .federation import FlowerFederation
    from .serverapp import RunSettings

__all__ = ["FlowerFederation", "RunSettings", "client_from_node_config", "read_client_data"]

_HOME = {
    "FlowerFederation": ".federation",
    "RunSettings": ".serverapp",
    "client_from_node_config": "._data",
    "read_client_data": "._data",
}


__getattr__, __dir__ = _lazy_names(globals(), _HOME)
