"""walship's Kerberos identity (walship.security) against a real MIT KDC: logging in from a
keytab or a ticket cache, new tickets past a short lifetime, and each refusal in one line."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_until

from walship import security
from walship.cli import main
from walship.errors import KerberosLoginError, KeytabError
from walship_testing.harness.kdc import MitKdc

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MitKdc]:
    with MitKdc(tmp_path_factory.mktemp("kdc")) as kdc:
        yield kdc


@pytest.fixture
def krb5(kdc: MitKdc, monkeypatch: pytest.MonkeyPatch) -> Iterator[MitKdc]:
    """The KDC's krb5.conf for this process; whatever the test logs in to is forgotten after."""
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
    for name in ("KRB5CCNAME", "KRB5_CLIENT_KTNAME", "WALSHIP_PRINCIPAL", "WALSHIP_KEYTAB"):
        monkeypatch.delenv(name, raising=False)
    security.logout()
    yield kdc
    security.logout()


def test_keytab_login_gets_new_tickets_past_a_short_lifetime(krb5: MitKdc) -> None:
    keytab = krb5.add_principal("brief", maxlife="6 seconds")
    identity = security.login(security.KerberosIdentity(f"brief@{krb5.realm}", str(keytab)))
    assert security.active() == identity
    first = security.check_ticket(identity)
    assert 0 < first <= 6
    ccache = os.environ["KRB5CCNAME"]
    assert ccache.startswith("FILE:") and Path(ccache[5:]).is_file()
    expired_at = time.monotonic() + first + 1
    wait_until(lambda: time.monotonic() > expired_at, timeout=first + 5, what="the first ticket's end")
    # the first ticket is over: a new one comes from the keytab
    assert security.check_ticket(identity) > 0
    listed = subprocess.run(["klist", "-c", ccache], capture_output=True, text=True, check=True).stdout
    assert f"brief@{krb5.realm}" in listed


def test_ticket_keeper_asks_again_at_half_the_lifetime(krb5: MitKdc) -> None:
    keytab = krb5.add_principal("kept", maxlife="4 seconds")
    identity = security.login(security.KerberosIdentity(f"kept@{krb5.realm}", str(keytab)))
    with security.TicketKeeper(identity, floor=0.5) as keeper:
        wait_until(lambda: keeper.renewals >= 4, timeout=20, what="four tickets asked for")
    assert security.check_ticket(identity) > 0


def test_ticket_cache_without_keytab(krb5: MitKdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keytab = krb5.add_principal("cached")
    ccache = tmp_path / "cc"
    env = {**os.environ, "KRB5_CONFIG": str(krb5.krb5_conf)}
    subprocess.run(["kinit", "-k", "-t", str(keytab), "-c", str(ccache), f"cached@{krb5.realm}"], env=env, check=True)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    identity = security.login(security.KerberosIdentity(f"cached@{krb5.realm}"))
    assert security.check_ticket(identity) > 60
    assert os.environ["KRB5CCNAME"] == f"FILE:{ccache}"  # the user's own cache, not a private one


def test_identity_from_environment(krb5: MitKdc, monkeypatch: pytest.MonkeyPatch) -> None:
    keytab = krb5.add_principal("fromenv")
    monkeypatch.setenv("WALSHIP_PRINCIPAL", f"fromenv@{krb5.realm}")
    monkeypatch.setenv("WALSHIP_KEYTAB", str(keytab))
    identity = security.active()  # a process given no flags (an executor) logs in from the environment
    assert identity == security.KerberosIdentity(f"fromenv@{krb5.realm}", str(keytab))
    assert security.check_ticket(identity) > 0


def refused(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    """``walship <flags> peer list`` must refuse in one line before anything is contacted."""
    code = main([*flags, "--zk", "127.0.0.1:1", "peer", "list"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_refusals_name_the_principal(krb5: MitKdc, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    realm = krb5.realm
    line = refused(capsys, "--principal", f"walship@{realm}", "--keytab", str(tmp_path / "missing.keytab"))
    assert f"keytab {tmp_path / 'missing.keytab'} for principal walship@{realm}: no such file" in line

    not_a_keytab = tmp_path / "notes.txt"
    not_a_keytab.write_text("a keytab's bytes never come from here\n")
    line = refused(capsys, "--principal", f"walship@{realm}", "--keytab", str(not_a_keytab))
    assert "not a keytab" in line and f"walship@{realm}" in line
    assert "bytes never" not in line

    line = refused(capsys, "--principal", f"walship@{realm}", "--keytab", str(tmp_path))
    assert "not a file" in line

    # a keytab whose principal the KDC no longer knows
    keytab = krb5.add_principal("retired")
    krb5.delete_principal("retired")
    line = refused(capsys, "--principal", f"retired@{realm}", "--keytab", str(keytab))
    assert f"principal retired@{realm}" in line and "the KDC does not know the principal" in line

    # a keytab with no key for the principal named
    line = refused(capsys, "--principal", f"stranger@{realm}", "--keytab", str(keytab))
    assert f"principal stranger@{realm}" in line and "the keytab holds no key" in line

    line = refused(capsys, "--keytab", str(keytab))
    assert "needs --principal" in line


def test_expired_ticket_without_keytab(
    krb5: MitKdc, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    keytab = krb5.add_principal("lapsed", maxlife="3 seconds")
    ccache = tmp_path / "cc"
    env = {**os.environ, "KRB5_CONFIG": str(krb5.krb5_conf)}
    subprocess.run(["kinit", "-k", "-t", str(keytab), "-c", str(ccache), f"lapsed@{krb5.realm}"], env=env, check=True)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    got = time.monotonic()
    wait_until(lambda: time.monotonic() > got + 4, timeout=10, what="the ticket's end")
    with pytest.raises(KerberosLoginError, match=f"lapsed@{krb5.realm}.*expired"):
        security.login(security.KerberosIdentity(f"lapsed@{krb5.realm}"))
    line = refused(capsys, "--principal", f"lapsed@{krb5.realm}")
    assert "expired" in line and "--keytab" in line


def test_keytab_error_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(KeytabError, match="no such file"):
        security.identity_from("walship@EXAMPLE.COM", str(tmp_path / "nope"), environ={})
    assert security.identity_from(environ={}) is None


def test_another_principal_gets_a_cache_of_its_own_and_a_failed_login_changes_nothing(krb5: MitKdc) -> None:
    first = security.login(security.KerberosIdentity(f"one@{krb5.realm}", str(krb5.add_principal("one"))))
    first_cache = os.environ["KRB5CCNAME"]
    second = security.login(security.KerberosIdentity(f"two@{krb5.realm}", str(krb5.add_principal("two"))))
    assert os.environ["KRB5CCNAME"] != first_cache and security.active() == second
    assert security.check_ticket(second) > 0
    env = {name: os.environ.get(name) for name in ("KRB5CCNAME", "KRB5_CLIENT_KTNAME")}
    with pytest.raises(KerberosLoginError, match="stranger"):
        security.login(security.KerberosIdentity(f"stranger@{krb5.realm}", second.keytab))
    assert security.active() == second and security.active() != first
    assert {name: os.environ.get(name) for name in env} == env
    assert security.check_ticket(second) > 0
