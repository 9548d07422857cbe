"""walship's Prometheus alert rules, as the package ships them, checked and unit-tested by
Prometheus's own ``promtool`` (Debian's prometheus package, installed by scripts/setup.sh):
``promtool check rules``, then ``promtool test rules`` with alert_rules_test.yml beside this
file (input series named as ``walship metrics serve`` serves them; that the served names are
the ones the rules use is tested against a real scrape in
tests/integration/test_status_alerts.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from walship.status.metrics import alert_rules

SPEC = Path(__file__).with_name("alert_rules_test.yml")


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool not found: scripts/setup.sh installs Debian's prometheus package, which has it"
    return found


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    """The shipped rules and their tests in one folder, as promtool finds a test's rule files."""
    (tmp_path / "alerts.yml").write_text(alert_rules(), encoding="utf-8")
    shutil.copy(SPEC, tmp_path / SPEC.name)
    return tmp_path


def run(promtool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_promtool_checks_the_rules(promtool: str, rules_dir: Path) -> None:
    done = run(promtool, "check", "rules", "alerts.yml", cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 7 rules found" in done.stdout


def test_promtool_unit_tests_pass(promtool: str, rules_dir: Path) -> None:
    done = run(promtool, "test", "rules", SPEC.name, cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_unit_tests_fail_when_an_alert_differs(promtool: str, rules_dir: Path) -> None:
    """The tests are not vacuous: a threshold moved makes them fail, naming the alert."""
    rules = (rules_dir / "alerts.yml").read_text()
    (rules_dir / "alerts.yml").write_text(
        rules.replace("walship_queue_lag_seconds > 900", "walship_queue_lag_seconds > 9000")
    )
    done = run(promtool, "test", "rules", SPEC.name, cwd=rules_dir)
    assert done.returncode == 1
    assert "alertname: WalshipReplicationLag, time: 6m" in done.stdout + done.stderr


def test_every_rule_has_a_severity_and_names_what_it_is_about() -> None:
    groups = yaml.safe_load(alert_rules())["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert [r["alert"] for r in rules] == [
        "WalshipStatusUnreadable",
        "WalshipQueueStuck",
        "WalshipShipErrors",
        "WalshipDeadLettersPending",
        "WalshipReplicationLag",
        "WalshipBulkLoadsNotShipped",
        "WalshipNoShipWithBacklog",
    ]
    #: the labels each alert's description names: the series it fires for
    names = {
        "WalshipStatusUnreadable": ["instance"],
        "WalshipQueueStuck": ["peer", "server", "queue"],
        "WalshipShipErrors": ["peer", "kind"],
        "WalshipDeadLettersPending": ["peer"],
        "WalshipReplicationLag": ["peer", "server", "queue"],
        "WalshipBulkLoadsNotShipped": ["peer", "server", "queue"],
        "WalshipNoShipWithBacklog": ["peer", "server", "queue"],
    }
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning"), r["alert"]
        assert set(r["annotations"]) == {"summary", "description"}, r["alert"]
        assert f"{{{{ $labels.{names[r['alert']][0]} }}}}" in r["annotations"]["summary"], r["alert"]
        for label in names[r["alert"]]:
            assert f"{{{{ $labels.{label} }}}}" in r["annotations"]["description"], (r["alert"], label)


def test_the_unit_tests_feed_only_series_the_rules_use() -> None:
    """A series named in the tests but not in the rules would be a typo the tests cannot see."""
    used = set(
        re.findall(
            r"\bwalship_[a-z_]+\b",
            " ".join(r["expr"] for g in yaml.safe_load(alert_rules())["groups"] for r in g["rules"]),
        )
    )
    spec = yaml.safe_load(SPEC.read_text())
    fed = {s["series"].split("{", 1)[0] for t in spec["tests"] for s in t["input_series"]}
    assert fed == used
