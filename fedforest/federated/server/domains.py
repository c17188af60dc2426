"""The handshake's category domains and class lists, declared or found (server side).

The request carries what the user declared (``domains``: [column, levels] pairs,
``from_dtype``, ``classes``) and, under ``"secure"``, ``min_level_rows``: the fewest
rows of a client that may name a level (the client half: ``federated/domains.py``).
Here the replies become each categorical column's sorted list and the class list:

- declared columns: the declared levels plus the missing category (the same whatever
  the rows hold); ``from_dtype`` lists must be equal at every client;
- undeclared columns: the sorted union of the levels the clients named (under
  ``"secure"`` only levels some client holds in ``min_level_rows`` rows); under ``"dp"``
  refused, with how to declare them;
- classes: the declared labels, or the union of the labels present (refused under
  ``"dp"``, before anything reaches the clients).
"""

from __future__ import annotations

from typing import Any

from ...federated.categorical import MISSING_CATEGORY, sort_categories, sorted_levels
from ..domains import column_index
from ..privacy.rules import default_min_rows
from ..protocol import Message
from .checks_handshake import label_type
from .config import GrowerConfig

__all__ = ["check_declared_classes", "domain_request", "unify_categories"]

_HOW = (
    "declare the levels on the estimator (categories={column: [levels...]}, or "
    'categories="from_dtype" with pandas CategoricalDtype(categories=[...]) columns)'
)


def check_declared_classes(cfg: GrowerConfig) -> None:
    """Under ``"dp"`` a classifier's labels must be declared (before any message)."""
    if cfg.privacy == "dp" and cfg.task == "classification" and cfg.classes is None:
        raise ValueError(
            'privacy="dp" needs the class labels declared: the labels present at a client '
            "change with one row and its handshake would say so, outside the guarantee. "
            "Pass FedForestClassifier(classes=[...]) with every label (a list per output "
            "for multi-output y)."
        )


def domain_request(cfg: GrowerConfig) -> dict[str, Any]:
    """The handshake request's fields for declared domains, classes and the level rule."""
    out: dict[str, Any] = {}
    if isinstance(cfg.categories, dict):
        out["domains"] = [
            [k.item() if hasattr(k, "item") else k, sorted_levels(list(v), f"categories[{k!r}]")]
            for k, v in cfg.categories.items()
        ]
    elif cfg.categories == "from_dtype":
        out["from_dtype"] = True
    if cfg.classes is not None:
        out["classes"] = cfg.classes
    if cfg.privacy == "secure":
        leaf = cfg.min_samples_leaf if isinstance(cfg.min_samples_leaf, int) else 1
        out["min_level_rows"] = int(cfg.min_aggregate_rows or default_min_rows(leaf))
    return out


def unify_categories(
    replies: list[tuple[str, Message]], names: list[str] | None, cfg: GrowerConfig
) -> dict[str, list[Any]]:
    """Each categorical column's sorted list, by column index (a string).

    All clients must agree which columns are categorical.
    """
    first_name, first = replies[0]
    cols = set(first.header.get("categories", {}))
    d = int(first.header["n_features"])
    union: dict[str, set[Any]] = {j: set() for j in cols}
    for name, rep in replies:
        mine = rep.header.get("categories", {})
        if set(mine) != cols:
            j = int(sorted(set(mine) ^ cols)[0])
            raise ValueError(
                f"Client {name!r} and client {first_name!r} disagree on whether feature "
                f"{_col(names, j)} is categorical; declare the same categorical columns on "
                "every client."
            )
        for j, values in mine.items():
            union[j].update(MISSING_CATEGORY if v is None else v for v in values)
    _check_level_kinds(replies, names)
    by_server = _server_domains(cfg, names, d)
    out = {}
    for j in sorted(cols, key=int):
        if int(j) in by_server:
            out[j] = sort_categories([*by_server[int(j)], MISSING_CATEGORY])
        elif (own := _dtype_domain(replies, j, names)) is not None:
            out[j] = sort_categories([*own, MISSING_CATEGORY])
        elif cfg.privacy == "dp":
            raise ValueError(
                f'privacy="dp" needs the levels of categorical column {_col(names, int(j))} '
                "declared: the levels present at a client change with one row and its "
                f"handshake would say so, outside the guarantee; {_HOW}."
            )
        else:
            out[j] = sort_categories(union[j])
    for k in by_server:
        if str(k) not in cols:
            raise ValueError(
                f"categories declares levels for column {_col(names, k)}, which no client "
                "holds as categorical; give it to the clients as categorical "
                "(categorical_features=[...])."
            )
    return out


def _check_level_kinds(replies: list[tuple[str, Message]], names: list[str] | None) -> None:
    """A column's levels are text at every client or numbers at every client.

    Each client's own levels are of one kind (its check); across clients, a column of
    numbers at one and of their text at another made two levels of each value (``1`` and
    ``"1"``), silently, and a model file that refuses to load.
    """
    first: dict[str, tuple[str, str]] = {}  # column -> (client, kind) of the first levels
    for name, rep in replies:
        for j, values in rep.header.get("categories", {}).items():
            present = [v for v in values if v is not None]
            if not present:
                continue
            kind = label_type(present[0])
            where, seen = first.setdefault(j, (name, kind))
            if seen != kind:
                raise ValueError(
                    f"Client {name!r} has {kind} levels in categorical column "
                    f"{_col(names, int(j))} but client {where!r} has {seen} ones; give the "
                    "column the same way on every client (X[column].astype(str), or "
                    "pd.to_numeric)."
                )


def _server_domains(cfg: GrowerConfig, names: list[str] | None, d: int) -> dict[int, list[Any]]:
    """The estimator's ``categories`` dict by column index (checked against the columns)."""
    if not isinstance(cfg.categories, dict):
        return {}
    out = {}
    for key, levels in cfg.categories.items():
        j = column_index(key, names, d)
        if j is None:
            raise ValueError(
                f"categories names column {key!r}, which is not a column of the clients' X "
                f"(columns: {names if names is not None else list(range(d))})."
            )
        out[j] = list(levels)
    return out


def _dtype_domain(
    replies: list[tuple[str, Message]], j: str, names: list[str] | None
) -> list[Any] | None:
    """Under ``from_dtype``: the clients' declared list of column ``j`` (equal at all)."""
    lists = {name: rep.header.get("declared", {}).get(j) for name, rep in replies}
    given = {name: v for name, v in lists.items() if v is not None}
    if not given:
        return None
    first = next(iter(given))
    for name, v in lists.items():
        if v is None or sort_categories(v) != sort_categories(given[first]):
            why = "does not declare them" if v is None else "declares other ones"
            raise ValueError(
                f'categories="from_dtype": client {first!r} declares the categories of column '
                f"{_col(names, int(j))} (a pandas CategoricalDtype) but client {name!r} {why}; "
                "give every client the same CategoricalDtype(categories=[...])."
            )
    return sort_categories(given[first])


def _col(names: list[str] | None, j: int) -> str:
    return repr(names[j]) if names is not None else str(j)
