"""fedforest: federated random forests whose splits equal centralized CART on pooled data.

Public names load lazily (PEP 562), so a process that needs one piece (a Flower ClientApp,
say) does not import the estimators and scikit-learn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "Client",
    "CommunicationLedger",
    "DiagnosticReport",
    "FedForestClassifier",
    "FedForestRegressor",
    "Federation",
    "LocalFederation",
    "diagnose",
    "load",
]

__version__ = "0.1.0"

_WHERE = {
    "Client": ".federated.client",
    "CommunicationLedger": ".federated.protocol",
    "DiagnosticReport": ".diagnostics",
    "FedForestClassifier": ".forest",
    "FedForestRegressor": ".forest",
    "Federation": ".transport",
    "LocalFederation": ".transport",
    "diagnose": ".diagnostics",
    "load": ".forest",
}

if TYPE_CHECKING:
    from .diagnostics import DiagnosticReport, diagnose
    from .federated.client import Client
    from .federated.protocol import CommunicationLedger
    from .forest import FedForestClassifier, FedForestRegressor, load
    from .transport import Federation, LocalFederation


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'fedforest' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
