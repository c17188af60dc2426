"""Real tabular datasets that ship with fedforest or scikit-learn (nothing is downloaded).

The vendored CSV files live in ``fedforest/datasets/data/``; their sources, licences and the one
correction we made are listed in ``fedforest/datasets/data/README.md``. Public entry points are
re-exported by :mod:`fedforest.datasets`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn import datasets as skdata
from sklearn.model_selection import train_test_split

__all__ = [
    "FED_HEART_CENTERS",
    "PANEL_DATASETS",
    "PanelDataset",
    "fed_heart_disease_split",
    "load_fed_heart_disease",
    "load_fragmentation_dataset",
    "load_panel_dataset",
]

#: FedHeart's centers in FLamby's order (center index 0..3).
FED_HEART_CENTERS = ("Cleveland", "Hungary", "Switzerland", "VA Long Beach")

#: FLamby's per-center train fraction and the ``random_state`` of its fixed split.
_FED_HEART_TRAIN_FRACTION = 0.66
_FLAMBY_SPLIT_SEED = 43

_CP_CODES = {"typical angina": 1, "atypical angina": 2, "non-anginal": 3, "asymptomatic": 4}
_RESTECG_CODES = {"normal": 0, "st-t abnormality": 1, "lv hypertrophy": 2}


def _read_csv(name: str, **kwargs: object) -> pd.DataFrame:
    """Read one vendored CSV from ``fedforest/data``."""
    with resources.files("fedforest.datasets.data").joinpath(name).open("r", encoding="utf-8") as f:
        return pd.read_csv(f, **kwargs)


def load_fed_heart_disease() -> pd.DataFrame:
    """FedHeart (FLamby's Fed-Heart-Disease) rebuilt from the vendored UCI table.

    The UCI Heart Disease data of four centers (Cleveland, Hungary, Switzerland, VA Long
    Beach; Janosi, Steinbrunn, Pfisterer and Detrano 1989, CC BY 4.0) processed as FLamby
    does: columns ``slope``, ``ca`` and ``thal`` dropped, rows with a missing value
    dropped (740 rows: 303 / 261 / 46 / 130), chest-pain type ``cp`` (1..4) and resting
    ECG ``restecg`` (0..2) one-hot encoded with the first level dropped, label
    ``num > 0``. Zero cholesterol values (all of Switzerland, part of VA) are kept as the
    source records them, as in FLamby.

    Returns
    -------
    frame : DataFrame, shape (740, 15)
        The 13 covariates ``age, sex, trestbps, chol, fbs, thalach, exang, oldpeak,
        cp_2, cp_3, cp_4, restecg_1, restecg_2`` (float64), ``target`` (int64, 0/1)
        and ``center`` (str, one of :data:`FED_HEART_CENTERS`), rows ordered by
        center as in FLamby and by the UCI record order within a center.
    """
    raw = _read_csv("heart_disease_uci.csv")
    raw = raw.drop(columns=["slope", "ca", "thal"]).dropna(axis=0)
    frame = pd.DataFrame(
        {
            "age": raw["age"],
            "sex": (raw["sex"] == "Male").astype(int),
            "trestbps": raw["trestbps"],
            "chol": raw["chol"],
            "fbs": raw["fbs"].astype(str).str.upper().eq("TRUE").astype(int),
            "thalach": raw["thalch"],
            "exang": raw["exang"].astype(str).str.upper().eq("TRUE").astype(int),
            "oldpeak": raw["oldpeak"],
        }
    ).astype(np.float64)
    cp = raw["cp"].map(_CP_CODES)
    restecg = raw["restecg"].map(_RESTECG_CODES)
    for level in (2, 3, 4):
        frame[f"cp_{level}"] = (cp == level).astype(np.float64)
    for level in (1, 2):
        frame[f"restecg_{level}"] = (restecg == level).astype(np.float64)
    frame["target"] = (raw["num"] > 0).astype(np.int64)
    frame["center"] = raw["dataset"].astype(str)
    order = {name: i for i, name in enumerate(FED_HEART_CENTERS)}
    frame = frame.iloc[np.argsort(frame["center"].map(order).to_numpy(), kind="stable")]
    return frame.reset_index(drop=True)


def fed_heart_disease_split(
    frame: pd.DataFrame | None = None, random_state: int = _FLAMBY_SPLIT_SEED
) -> NDArray[np.bool_]:
    """FLamby's per-center train/test split of FedHeart: 66 % train, stratified.

    Each center's rows are split by ``train_test_split(..., train_size=0.66,
    random_state=random_state, stratify=labels)``; the default seed 43 is FLamby's.

    Parameters
    ----------
    frame : DataFrame or None, default=None
        The output of :func:`load_fed_heart_disease` (loaded when None).
    random_state : int, default=43

    Returns
    -------
    is_test : ndarray of bool, shape (n_rows,)
        True for the held-out rows.
    """
    frame = load_fed_heart_disease() if frame is None else frame
    is_test = np.zeros(len(frame), dtype=bool)
    for center in pd.unique(frame["center"]):
        rows = np.flatnonzero((frame["center"] == center).to_numpy())
        labels = frame["target"].to_numpy()[rows]
        counts = np.bincount(labels, minlength=2)
        stratify = labels if (counts > 2).all() else None
        _, test = train_test_split(
            rows,
            train_size=_FED_HEART_TRAIN_FRACTION,
            test_size=1.0 - _FED_HEART_TRAIN_FRACTION,
            random_state=random_state,
            shuffle=True,
            stratify=stratify,
        )
        is_test[test] = True
    return is_test


@dataclass(frozen=True, eq=False)
class PanelDataset:
    """One real dataset of the Appendix B panel.

    Attributes
    ----------
    name : str
    X : ndarray of float64, shape (n_samples, n_features)
    y : ndarray, shape (n_samples,)
        float64 targets (regression) or int64 class codes (classification).
    task : {"regression", "classification"}
    feature_names : list of str
    site : ndarray of str or None
        A natural site column (hospital, island) when the data has one.
    source : str
        Where the data comes from and its licence.
    """

    name: str
    X: NDArray[np.float64]
    y: NDArray[np.float64] | NDArray[np.int64]
    task: str
    feature_names: list[str]
    site: NDArray[np.str_] | None
    source: str

    @property
    def n_classes(self) -> int:
        """Number of classes (0 for regression)."""
        return 0 if self.task == "regression" else int(np.unique(self.y).size)


def _from_frame(
    name: str, frame: pd.DataFrame, target: str, task: str, source: str, site: str | None = None
) -> PanelDataset:
    features = frame.drop(columns=[c for c in (target, site) if c is not None])
    y_raw = frame[target].to_numpy()
    y = (
        y_raw.astype(np.float64)
        if task == "regression"
        else np.unique(y_raw, return_inverse=True)[1].astype(np.int64)
    )
    return PanelDataset(
        name=name,
        X=features.to_numpy(dtype=np.float64),
        y=y,
        task=task,
        feature_names=[str(c) for c in features.columns],
        site=None if site is None else frame[site].astype(str).to_numpy(),
        source=source,
    )


def _sklearn(name: str, loader: Callable[..., object], task: str, source: str) -> PanelDataset:
    bunch = loader(as_frame=True)
    frame = bunch.frame  # type: ignore[attr-defined]
    return _from_frame(name, frame, "target", task, source)


def _heart_disease() -> PanelDataset:
    frame = load_fed_heart_disease()
    source = "UCI Heart Disease (Janosi et al. 1989), CC BY 4.0; FLamby's FedHeart processing"
    return _from_frame("heart-disease", frame, "target", "classification", source, "center")


def _heart_failure() -> PanelDataset:
    frame = _read_csv("heart_failure_clinical_records.csv", thousands=",")
    source = "Heart failure clinical records (Chicco & Jurman 2020), CC BY 4.0"
    return _from_frame("heart-failure", frame, "DEATH_EVENT", "classification", source)


def _heart_attack() -> PanelDataset:
    frame = _read_csv("heart_attack_zheen.csv")
    frame["Result"] = (frame["Result"] == "positive").astype(int)
    source = "Heart Attack dataset, Zheen hospital, Erbil (T. A. Rashid), CC BY 4.0"
    return _from_frame("heart-attack", frame, "Result", "classification", source)


def _cardiovascular() -> PanelDataset:
    frame = _read_csv("cardiovascular_disease_india.csv").drop(columns=["patientid"])
    source = "Cardiovascular Disease Dataset (Doppala & Bhattacharyya 2021), CC BY 4.0"
    return _from_frame("cardiovascular", frame, "target", "classification", source)


def _cvd_bangladesh() -> PanelDataset:
    raw = _read_csv("cvd_bangladesh_cair2025.csv")
    yes = {"Y": 1.0, "N": 0.0}
    frame = raw.drop(
        columns=[
            "Blood Pressure (mmHg)",
            "CVD Risk Level",
            "Blood Pressure Category",
            "Height (cm)",
        ]
    ).assign(
        **{
            "Sex": raw["Sex"].map({"F": 0.0, "M": 1.0}),
            "Smoking Status": raw["Smoking Status"].map(yes),
            "Diabetes Status": raw["Diabetes Status"].map(yes),
            "Family History of CVD": raw["Family History of CVD"].map(yes),
            "Physical Activity Level": raw["Physical Activity Level"].map(
                {"Low": 0.0, "Moderate": 1.0, "High": 2.0}
            ),
        }
    )
    source = "CAIR-CVD-2025 cardiovascular risk, Bangladesh (Kaggle listing: CC0)"
    return _from_frame("cvd-risk-score", frame.dropna(), "CVD Risk Score", "regression", source)


def _penguins() -> PanelDataset:
    raw = _read_csv("penguins.csv").dropna()
    frame = pd.DataFrame(
        {
            "bill_length_mm": raw["bill_length_mm"],
            "bill_depth_mm": raw["bill_depth_mm"],
            "flipper_length_mm": raw["flipper_length_mm"],
            "male": (raw["sex"] == "male").astype(float),
            "chinstrap": (raw["species"] == "Chinstrap").astype(float),
            "gentoo": (raw["species"] == "Gentoo").astype(float),
            "body_mass_g": raw["body_mass_g"],
            "island": raw["island"],
        }
    )
    source = "Palmer penguins (Gorman, Williams & Fraser 2014; Palmer LTER), CC0"
    return _from_frame("penguins-mass", frame, "body_mass_g", "regression", source, "island")


_SKLEARN_UCI = "scikit-learn bundled copy of the UCI dataset (CC BY 4.0)"

#: The Appendix B panel: name -> loader. Every file ships with fedforest or scikit-learn.
PANEL_DATASETS: Mapping[str, Callable[[], PanelDataset]] = MappingProxyType(
    {
        "diabetes": lambda: _sklearn(
            "diabetes", skdata.load_diabetes, "regression", "scikit-learn (Efron et al. 2004)"
        ),
        "breast-cancer": lambda: _sklearn(
            "breast-cancer", skdata.load_breast_cancer, "classification", _SKLEARN_UCI
        ),
        "wine": lambda: _sklearn("wine", skdata.load_wine, "classification", _SKLEARN_UCI),
        "iris": lambda: _sklearn("iris", skdata.load_iris, "classification", _SKLEARN_UCI),
        "digits": lambda: _sklearn("digits", skdata.load_digits, "classification", _SKLEARN_UCI),
        "heart-disease": _heart_disease,
        "heart-failure": _heart_failure,
        "heart-attack": _heart_attack,
        "cardiovascular": _cardiovascular,
        "cvd-risk-score": _cvd_bangladesh,
        "penguins-mass": _penguins,
    }
)


def load_panel_dataset(name: str) -> PanelDataset:
    """Load one dataset of the Appendix B panel by name (see :data:`PANEL_DATASETS`).

    Parameters
    ----------
    name : str

    Returns
    -------
    data : PanelDataset
    """
    if name not in PANEL_DATASETS:
        raise ValueError(f"Unknown panel dataset {name!r}; choose one of {sorted(PANEL_DATASETS)}.")
    return PANEL_DATASETS[name]()


def load_fragmentation_dataset() -> PanelDataset:
    """The stand-in for Banknote Authentication in the fragmentation table (Table 3).

    Banknote (UCI, 1,372 rows, 4 numeric features, binary) is not shipped by any package
    fedforest can install, and nothing is downloaded at run time. The Zheen hospital heart
    attack data (1,319 rows, 8 numeric features, binary, CC BY 4.0) is the closest
    vendored match in size and kind, so at every K the clients hold about as many rows
    as Banknote's would.

    Returns
    -------
    data : PanelDataset
    """
    return _heart_attack()
