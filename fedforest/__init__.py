"""fedforest: federated random forests whose splits equal centralized CART on pooled data.

Public names load lazily (PEP 562), so a process that needs one piece (a Flower ClientApp,
say) does not import the estimators and scikit-learn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names as _lazy_names

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


__getattr__, __dir__ = _lazy_names(globals(), _WHERE)
