"""numba's disk cache saved by one process at a time (``fedforest/_numba_cache.py``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from numba.core.caching import IndexDataCacheFile

import fedforest.federated.client  # noqa: F401  (installs the lock, as any fit does)


def _race(tmp_path: Path, save: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Two savers (two processes' cache files of one kernel) save one version each: the
    first pauses after reading the index until the second has read it too (or 3 s, if a
    lock keeps the second out), then both write."""
    tmp_path.mkdir()  # numba's cache locator makes the directory before it saves
    first_read, second_read = threading.Event(), threading.Event()
    load_index = IndexDataCacheFile._load_index

    def paced_load_index(self: Any) -> Any:
        index = load_index(self)
        if not first_read.is_set():
            first_read.set()
            second_read.wait(timeout=3.0)
        else:
            second_read.set()
        return index

    monkeypatch.setattr(IndexDataCacheFile, "_load_index", paced_load_index)
    errors: list[BaseException] = []

    def run(kind: str) -> None:
        try:
            save(IndexDataCacheFile(str(tmp_path), "kernel", "stamp"), (kind,), f"code for {kind}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    first = threading.Thread(target=run, args=("f8",))
    first.start()
    assert first_read.wait(timeout=60)
    second = threading.Thread(target=run, args=("i8",))
    second.start()
    first.join()
    second.join()
    monkeypatch.setattr(IndexDataCacheFile, "_load_index", load_index)
    assert not errors, errors
    reader = IndexDataCacheFile(str(tmp_path), "kernel", "stamp")  # a third process
    return {k: reader.load((k,)) for k in ("f8", "i8")}


def test_two_processes_saving_one_kernel_keep_each_version_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = IndexDataCacheFile.save
    assert getattr(locked, "__wrapped__", None) is not None, "the lock is not installed"
    assert _race(tmp_path / "locked", locked, monkeypatch) == {
        "f8": "code for f8",
        "i8": "code for i8",
    }
    # numba's own save: both pick the first free data file; one version is lost or, worse,
    # its argument types lead to the other's machine code (a crash when that is run).
    unlocked = _race(tmp_path / "numba", locked.__wrapped__, monkeypatch)
    assert unlocked != {"f8": "code for f8", "i8": "code for i8"}, unlocked
