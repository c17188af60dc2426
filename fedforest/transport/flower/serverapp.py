"""The Flower ServerApp: fedforest's grower driving the SuperNodes through the Grid.

The run config (``[tool.flwr.app.config]`` of the app, overridden by ``flwr run
--run-config``) carries the estimator's hyperparameters, with dashes for underscores
(``n-estimators = 50``, ``max-depth = 8``, ``seed = 0`` for ``random_state``; TOML has no
null, so the string ``"none"`` stands for None, and ``"default"`` keeps the estimator's
default), the ``task`` (``"regression"`` or
``"classification"``) and the transport settings: ``model-path`` (absolute path of the
model file to write), ``metrics-path`` (optional JSON with the timings and the ledger),
``min-nodes``, ``round-timeout`` and ``discovery-timeout`` (seconds), ``keep-awake``
(``"auto"``, ``true`` or ``false``: ``FlowerFederation``'s ``keep_awake``). TOML has no lists:
the declared class labels and category levels are strings, ``classes = "a,b,c"`` (typed
as ``read_csv`` types a column of them: numbers when every label reads as one) and
``categories = "column=level,level;column2=level,..."`` (text levels) or
``"from_dtype"``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from logging import INFO
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.common import log
from flwr.common.logger import console_handler
from flwr.serverapp import Grid, ServerApp

from ...federated import domains
from ...federated.domains import declaration_hint
from ...forest import FedForestClassifier, FedForestRegressor
from .federation import FlowerFederation

__all__ = [
    "RunSettings",
    "app",
    "parse_categories",
    "parse_classes",
    "train",
    "with_run_config_hint",
]

app = ServerApp()

_ESTIMATORS: dict[str, type[FedForestRegressor] | type[FedForestClassifier]] = {
    "regression": FedForestRegressor,
    "classification": FedForestClassifier,
}
_TRANSPORT_KEYS = {
    "task",
    "model-path",
    "metrics-path",
    "min-nodes",
    "round-timeout",
    "discovery-timeout",
    "keep-awake",
}


@dataclass(frozen=True)
class RunSettings:
    """What a ServerApp run needs, read and checked from the run config.

    Attributes
    ----------
    task : {"regression", "classification"}
    params : dict
        Estimator parameters (underscored names, ``None`` where the config said "none").
    model_path : Path
        Absolute path of the model file; its directory must exist.
    metrics_path : Path or None
        Where to write the timings and the ledger as JSON, if anywhere.
    min_nodes : int
    round_timeout : float or None
    discovery_timeout : float
    keep_awake : bool or None
        ``FlowerFederation``'s ``keep_awake``: None for ``"auto"`` (the default).
    """

    task: str
    params: dict[str, Any]
    model_path: Path
    metrics_path: Path | None
    min_nodes: int
    round_timeout: float | None
    discovery_timeout: float
    keep_awake: bool | None = None

    @classmethod
    def from_run_config(cls, run_config: Mapping[str, Any]) -> RunSettings:
        """Read the run config; raise ``ValueError`` naming the first bad key."""
        # "none" is a value of privacy, not None.
        config = {
            k: (v if k in _STRING_NONE else _none(v))
            for k, v in run_config.items()
            if v != _DEFAULT
        }
        task = str(config.get("task", "regression"))
        if task not in _ESTIMATORS:
            raise ValueError(
                f"run config task={task!r}; expected 'regression' or 'classification'."
            )
        if task == "regression" and "classes" in config:
            raise ValueError(
                f"run config classes={config['classes']!r}: class labels go with "
                'task = "classification".'
            )
        known = set(_ESTIMATORS[task]().get_params())
        params = {_param_name(k): v for k, v in config.items() if k not in _TRANSPORT_KEYS}
        if params.get("classes") is not None:
            params["classes"] = parse_classes(params["classes"])
        if params.get("categories") is not None:
            params["categories"] = parse_categories(params["categories"])
        unknown = sorted(
            k for k in config if k not in _TRANSPORT_KEYS and _param_name(k) not in known
        )
        if unknown:
            raise ValueError(
                f"Unknown run config key(s) {unknown}; expected {sorted(_TRANSPORT_KEYS)} or "
                f"estimator parameters with dashes ({sorted(known)}; 'seed' for random_state)."
            )
        metrics = config.get("metrics-path") or None
        return cls(
            task=task,
            params=params,
            model_path=_output_path(config.get("model-path"), "model-path"),
            metrics_path=None if metrics is None else _output_path(metrics, "metrics-path"),
            min_nodes=_count(config.get("min-nodes", 1), "min-nodes"),
            round_timeout=_seconds(
                config.get("round-timeout", 600.0), "round-timeout", none_ok=True
            ),
            discovery_timeout=_seconds(
                config.get("discovery-timeout", 60.0), "discovery-timeout", none_ok=False
            ),
            keep_awake=_keep_awake(config.get("keep-awake", "auto")),
        )

    def estimator(self) -> FedForestRegressor | FedForestClassifier:
        """The estimator with the run's hyperparameters, validated."""
        model = _ESTIMATORS[self.task](**self.params)
        model._validate_params()
        return model


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Train on the connected SuperNodes, save the model and log the ledger.

    Nothing is written unless training succeeds: a client failure (under the default
    ``on-client-failure = "raise"``) or invalid data ends the run with the error.
    """
    _route_fedforest_logs()
    settings = RunSettings.from_run_config(context.run_config)
    model = settings.estimator()
    fed = FlowerFederation(
        grid,
        min_nodes=settings.min_nodes,
        round_timeout=settings.round_timeout,
        discovery_timeout=settings.discovery_timeout,
        keep_awake=settings.keep_awake,
    )
    fit_seconds = train(model, fed)
    model.save(settings.model_path)  # written whole or not at all
    metrics = run_metrics(model, fed, fit_seconds)
    log(INFO, "fedforest: model written to %s\n%s", settings.model_path, _report(model, metrics))
    if settings.metrics_path is not None:
        _write_text_atomically(settings.metrics_path, json.dumps(metrics, indent=2))


def train(model: FedForestRegressor | FedForestClassifier, fed: FlowerFederation) -> float:
    """Fit on the federation, then send the end-of-fit notice; the seconds it took.

    An error that asks for the estimator's ``classes=`` or ``categories=`` (a label or
    level that must be declared) also names the run-config keys that declare them.
    """
    start = time.perf_counter()
    try:
        model.fit_federated(fed)
    except ValueError as exc:  # the estimator's parameters named: here they are run-config keys
        exc.args = (with_run_config_hint(str(exc)), *exc.args[1:])
        raise
    finally:
        _close(fed)
    return time.perf_counter() - start


def run_metrics(
    model: FedForestRegressor | FedForestClassifier, fed: FlowerFederation, fit_seconds: float
) -> dict[str, Any]:
    """Timings and communication of a finished run, JSON-able.

    ``fit_seconds`` runs from the first protocol round to the end-of-fit notice included
    (``finish_seconds`` of it); the discovery before it takes ``discovery_seconds``.
    """
    ledger = model.communication_
    rounds = np.asarray(fed.round_seconds)
    return {
        "clients": [str(c) for c in model.clients_],
        "dropped_clients": [[name, r] for name, r in model.dropped_clients_],
        "dropped_reasons": dict(model.dropped_reasons_),
        "n_estimators": model.n_estimators,
        "max_depth": model.max_depth,
        "rounds": ledger.rounds,
        "fit_seconds": fit_seconds,
        "discovery_seconds": fed.discovery_seconds,
        "finish_seconds": fed.finish_seconds,
        "awake_nodes": list(fed.awake_nodes),
        "wait_messages": fed.wait_messages,
        "round_seconds": rounds.tolist(),
        "median_round_seconds": float(np.median(rounds)) if rounds.size else None,
        "upload_bytes": ledger.upload_bytes,
        "download_bytes": ledger.download_bytes,
        "per_round": ledger.to_dict()["records"],
    }


def _report(model: FedForestRegressor | FedForestClassifier, metrics: dict[str, Any]) -> str:
    table = model.communication_.per_round
    table["seconds"] = np.round(metrics["round_seconds"], 2)
    reasons = metrics["dropped_reasons"]
    dropped = [[name, r, reasons.get(name)] for name, r in metrics["dropped_clients"]]
    return (
        f"{table.to_string(index=False)}\n"
        f"{metrics['rounds']} rounds in {metrics['fit_seconds']:.1f} s (median round "
        f"{metrics['median_round_seconds']:.2f} s); {metrics['upload_bytes']} bytes up, "
        f"{metrics['download_bytes']} bytes down"
        + (f"; dropped (client, round, reason): {dropped}" if dropped else "")
    )


def _close(fed: FlowerFederation) -> None:
    """End-of-fit notice to the nodes; never hides the training error that may be raised."""
    try:
        fed.close()
    except Exception as exc:  # noqa: BLE001 - best effort, logged
        log(logging.WARNING, "fedforest: could not notify the nodes of the end: %s", exc)


def _write_text_atomically(path: Path, text: str) -> None:
    """Write then rename over ``path``: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


_DEFAULT = "default"  # a run config value that keeps the estimator's default
_STRING_NONE = {"privacy"}  # keys whose value "none" is a string, not None


def parse_classes(value: Any) -> list[Any]:
    """The run config's ``classes``: ``"a,b,c"`` as a list of labels.

    Labels are typed as ``read_csv`` types a column holding them (so that they equal the
    labels the SuperNodes read from their files): integers when every label reads as an
    integer, floats when every one reads as a number, booleans when every one is
    true/false, text otherwise; a JSON list (``'["1", "2"]'``) keeps its own types (text
    labels that read as numbers, in Parquet files). Raises ``ValueError`` naming the key.
    """
    if not isinstance(value, str):
        raise ValueError(
            f"run config classes={value!r}: give the labels as one string, comma-separated "
            '(classes = "0,1,2" or classes = "sick,well"); TOML lists are not run-config values.'
        )
    if value.lstrip().startswith("["):  # a JSON list: the labels' types as written
        return _json_classes(value)
    labels = [label.strip() for label in value.split(",")]
    if "" in labels or len(set(labels)) != len(labels):
        raise ValueError(
            f"run config classes={value!r}: the labels must be non-empty and distinct "
            '(classes = "LABEL,LABEL,...").'
        )
    words = {label.lower() for label in labels}
    if words <= {"true", "false"}:
        return [label.lower() == "true" for label in labels]
    for kind in (int, float):
        try:
            numbers = [kind(label) for label in labels]
        except ValueError:
            continue
        if len(set(numbers)) != len(numbers) or not all(np.isfinite(numbers)):
            raise ValueError(
                f"run config classes={value!r}: the labels read as numbers that are not "
                "distinct and finite."
            )
        return numbers
    return labels


def _json_classes(value: str) -> list[Any]:
    """``classes = '["1", "2"]'``: text labels that read as numbers, or any labels typed."""
    try:
        labels = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"run config classes={value!r}: not a JSON list ({exc}).") from None
    plain = (str, int, float, bool)
    if (
        not isinstance(labels, list)
        or not labels
        or not all(isinstance(v, plain) for v in labels)
        or len(set(labels)) != len(labels)  # 1 and true are one label, as in Python
    ):
        raise ValueError(
            f"run config classes={value!r}: a JSON list of distinct labels (text, numbers "
            'or true/false) is expected, e.g. classes = \'["1", "2"]\'.'
        )
    return labels


def parse_categories(value: Any) -> str | dict[str, list[str]]:
    """The run config's ``categories``: ``"from_dtype"``, or ``"col=a,b;col2=c,d"``.

    Levels stay text, as ``read_csv`` reads a text column (a CSV's categorical column);
    the command line's ``--categories`` goes through the same parser
    (``domains.parse_categories``). Raises ``ValueError`` naming the key.
    """
    if value == "from_dtype":
        return value
    how = 'categories = "COLUMN=LEVEL,LEVEL,...;COLUMN2=LEVEL,..." or "from_dtype"'
    where = f"run config categories={value!r}"
    if not isinstance(value, str):
        raise ValueError(f"{where}: give one string, {how}.")
    return domains.parse_categories(value.split(";"), where, how)


#: The estimator's parameters that error messages name, as the run config spells them.
_RUN_CONFIG_HINTS = {
    "classes=": 'classes = "LABEL,LABEL,..."',
    "categories=": 'categories = "COLUMN=LEVEL,LEVEL,...;COLUMN2=..."',
    "epsilon=": "epsilon",
}


def with_run_config_hint(message: str) -> str:
    """An error naming ``classes=``, ``categories=`` or ``epsilon=``, with the run-config keys."""
    where = "in the Flower run config"
    return declaration_hint(message, _RUN_CONFIG_HINTS, where, see="docs/flower.md")


def _none(value: Any) -> Any:
    """TOML has no null: the string "none" (any case) means None."""
    return None if isinstance(value, str) and value.lower() == "none" else value


def _param_name(key: str) -> str:
    return "random_state" if key == "seed" else key.replace("-", "_")


def _count(value: Any, key: str) -> int:
    """A whole number of at least 1 (``int()`` made 2.5 two and ``true`` one, silently)."""
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value < 1:
        raise ValueError(f"run config {key}={value!r}: expected a whole number, at least 1.")
    return int(value)


def _seconds(value: Any, key: str, *, none_ok: bool) -> Any:
    """Seconds: a finite number above 0, or None ("none": no limit) where ``none_ok``."""
    if value is None and none_ok:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not np.isfinite(value) or value <= 0:
        shown = "'none'" if value is None else repr(value)  # the config's text for None
        unless = ' or "none" (no limit)' if none_ok else ""
        raise ValueError(
            f"run config {key}={shown}: expected a finite number of seconds above 0{unless}."
        )
    return float(value)


def _keep_awake(value: Any) -> bool | None:
    """``keep-awake``: ``"auto"`` (None), or a TOML boolean (``"true"``, ``"false"`` too)."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("auto", "true", "false"):
        return None if text == "auto" else text == "true"
    raise ValueError(f'run config keep-awake={value!r}: expected "auto", true or false.')


def _output_path(value: Any, key: str) -> Path:
    """An absolute path whose directory exists (checked before training, not after)."""
    if not value:
        raise ValueError(f"The run config needs {key}, an absolute path to write to.")
    path = Path(str(value)).expanduser()
    if not path.is_absolute():
        raise ValueError(
            f"{key}={str(value)!r} is relative; give an absolute path (the ServerApp does not "
            "run in your working directory)."
        )
    if not path.parent.is_dir():
        raise ValueError(f"{key}={str(value)!r}: directory {str(path.parent)!r} does not exist.")
    return path


def _route_fedforest_logs() -> None:
    """Send the log records of fedforest (e.g. a dropped client) where Flower's go."""
    logger = logging.getLogger("fedforest")
    if console_handler not in logger.handlers:
        logger.addHandler(console_handler)
        logger.setLevel(logging.INFO)
