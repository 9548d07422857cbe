"""WalStore.delete: many files at once, in order, a file gone already told apart; on a remote
file system (fsspec's memory one here) with several deletes in flight."""

from __future__ import annotations

from pathlib import Path

from walship.replicate.walstore import WalStore


def test_local_files_are_deleted_in_order(tmp_path: Path) -> None:
    archive = tmp_path / "oldWALs"
    archive.mkdir()
    names = [f"w{i}" for i in range(5)]
    for name in names:
        (archive / name).write_bytes(b"x")
    store = WalStore(str(tmp_path))
    paths = [f"{store.base}/oldWALs/{n}" for n in names]
    paths.insert(2, f"{store.base}/oldWALs/gone")  # listed, deleted meanwhile by someone else
    assert store.delete(paths) == [True, True, False, True, True, True]
    assert list(archive.iterdir()) == []


def test_remote_files_are_deleted_with_several_in_flight(memory_root: str) -> None:
    store = WalStore(memory_root)
    paths = [f"{store.base}/oldWALs/w{i:03d}" for i in range(100)]
    for path in paths:
        store.fs.pipe_file(path, b"x")
    gone = {7, 50}
    for i in gone:
        store.fs.rm_file(paths[i])
    assert store.delete(paths) == [i not in gone for i in range(100)]
    assert not any(store.fs.exists(path) for path in paths)


def test_nothing_to_delete(tmp_path: Path) -> None:
    assert WalStore(str(tmp_path)).delete([]) == []
