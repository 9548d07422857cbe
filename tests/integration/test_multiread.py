"""Many reads in one request (ZooKeeper's multiRead) against a real server, under a chroot,
beyond one chunk, with znodes missing, and the same answers from the per-znode fallback."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

from walship.errors import ZkAuthError
from walship.zk import multiread
from walship.zk.multiread import CHUNK, read_many

pytestmark = pytest.mark.integration


def test_read_many_matches_kazoos_own_reads(zk: KazooClient) -> None:
    n = CHUNK + 37  # two requests
    tx = zk.transaction()
    zk.ensure_path("/mr")
    for i in range(n):
        tx.create(f"/mr/n{i:04d}", b"value-%d" % i)
    assert all(r is True or isinstance(r, str) for r in tx.commit())
    zk.set("/mr/n0003", b"changed")
    ops = [("children", "/mr"), ("data", "/missing"), ("children", "/missing")]
    ops += [("data", f"/mr/n{i:04d}") for i in range(n)]
    got = read_many(zk, ops)
    assert sorted(got[0]) == sorted(zk.get_children("/mr"))
    assert got[1] is None and got[2] is None
    for i, answer in enumerate(got[3:]):
        data, stat = zk.get(f"/mr/n{i:04d}")
        assert answer == (data, stat)
    assert got[3 + 3][0] == b"changed" and got[3 + 3][1].version == 1
    multiread._unsupported.add(zk)  # the fallback for servers before 3.6
    try:
        assert read_many(zk, ops) == got
    finally:
        multiread._unsupported.discard(zk)


def test_read_many_raises_walships_error_for_what_kazoo_raises(zk: KazooClient) -> None:
    zk.create("/locked", b"x", acl=[make_digest_acl("someone", "else", all=True)])
    with pytest.raises(ZkAuthError, match="reading znodes: read many.*authentication failed or missing") as caught:
        read_many(zk, [("data", "/locked")])
    assert isinstance(caught.value.__cause__, NoAuthError)  # kazoo's own, kept as the cause
    with pytest.raises(ValueError, match="unknown read kind"):
        read_many(zk, [("stat", "/locked")])
