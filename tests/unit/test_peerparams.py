"""The walship_add_peer DAG's Params made into a peer (plugins/walship_airflow/peerparams.py):
the sink protocol each Param value names, and a refused one named."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from walship_airflow.peerparams import PROTOCOLS, peer_config

PARAMS = {"peer_id": "1", "cluster_key": "b-zk:2181:/hbase", "sink_thrift2": "b-thrift2:9090"}


@pytest.mark.parametrize("protocol", ["thrift2", "hbase"])
def test_the_protocol_param_is_the_peers_sink(protocol: str) -> None:
    peer = peer_config({**PARAMS, "protocol": protocol})
    assert peer.configuration["walship.sink.protocol"] == protocol
    assert peer.configuration["walship.sink.thrift2"] == "b-thrift2:9090"  # the copy and verify use it
    assert protocol in PROTOCOLS


def test_an_unknown_protocol_is_refused_by_name() -> None:
    with pytest.raises(
        AirflowFailException, match="Param protocol: must be one of thrift1, thrift2, hbase, got 'rest'"
    ):
        peer_config({**PARAMS, "protocol": "rest"})
