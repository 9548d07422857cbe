"""The Spark driver's class archive is named in the driver's Java options only where it was
built for the Java, Spark and Java options there now; the executors are never given it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from walship.spark import jvm
from walship.spark.entry import JVM_OPTIONS, job_settings


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "share" / "spark-driver.jsa"
    path.parent.mkdir()
    monkeypatch.setattr(jvm, "ARCHIVE", path)
    return path


def built_for(archive: Path, fingerprint: dict[str, str] | None) -> None:
    archive.write_bytes(b"an archive")
    archive.with_suffix(".fingerprint").write_text(json.dumps(fingerprint))


def test_an_archive_built_for_this_java_and_spark_is_mapped_by_the_driver_only(archive: Path) -> None:
    built_for(archive, jvm.fingerprint())
    settings = job_settings()
    assert settings["spark.driver.extraJavaOptions"] == (
        f"{JVM_OPTIONS} -Xlog:disable -Xlog:all=warning:stderr -XX:SharedArchiveFile={archive}"
    )
    assert settings["spark.executor.extraJavaOptions"] == JVM_OPTIONS


@pytest.mark.parametrize("changed", ["java_changed", "pyspark", "spark_home", "options"])
def test_an_archive_built_for_another_java_or_spark_is_left_out(archive: Path, changed: str) -> None:
    fingerprint = jvm.fingerprint()
    assert fingerprint is not None
    built_for(archive, {**fingerprint, changed: "something else"})
    assert jvm.archive_option() is None
    assert job_settings()["spark.driver.extraJavaOptions"] == JVM_OPTIONS


def test_no_archive_without_its_file_or_fingerprint(archive: Path) -> None:
    assert jvm.archive_option() is None  # never built
    built_for(archive, jvm.fingerprint())
    archive.with_suffix(".fingerprint").write_text("not json")
    assert jvm.archive_option() is None
    archive.with_suffix(".fingerprint").unlink()
    assert jvm.archive_option() is None


def test_a_java_moved_since_the_build_leaves_the_archive_out(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built_for(archive, jvm.fingerprint())
    monkeypatch.setenv("JAVA_HOME", str(archive.parent / "no-such-jdk"))
    assert jvm.fingerprint() is None
    assert jvm.archive_option() is None


def test_an_archive_path_with_a_space_is_never_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "my share" / "spark-driver.jsa"
    path.parent.mkdir()
    monkeypatch.setattr(jvm, "ARCHIVE", path)
    built_for(path, jvm.fingerprint())
    assert jvm.archive_option() is None
