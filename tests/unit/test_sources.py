"""``[walship] sources`` parsed into sources and their DAG ids; what it refuses, named."""

from __future__ import annotations

import pytest

from walship_airflow.sources import Source, SourcesError, parse_sources


def test_the_default_connection_keeps_the_plain_dag_ids() -> None:
    assert parse_sources("walship_source") == [Source("walship_source", "")]
    (default, east, west) = parse_sources(" walship_source , hbase_east,hbase-west-prod=west ")
    assert default.dag_id("walship_replicate") == "walship_replicate"
    assert east.dag_id("walship_replicate") == "walship_replicate_hbase_east"
    assert west == Source("hbase-west-prod", "west") and west.dag_id("walship_tail") == "walship_tail_west"
    assert east.asset_uri("walship://status") == "walship://status/hbase_east"
    assert default.asset_uri("walship://status") == "walship://status"
    assert east.asset_name("walship_status") == "walship_status-hbase_east"
    assert east.doc("of `walship_source` (connection)") == "of `hbase_east` (connection)"
    assert east.tags == ["source:hbase_east"] and default.tags == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a, b, a", "[walship] sources: connection 'a' is listed twice"),
        ("a=x, b=x", "[walship] sources: connections 'a' and 'b' both get suffix 'x'"),
        ("walship_source, other=", "[walship] sources: connection 'other' has an empty suffix after '='"),
        ("a=bad suffix", "[walship] sources: connection 'a': suffix 'bad suffix' cannot end a DAG id"),
        ("a, =x", "[walship] sources: entry '=x' has no connection id"),
        (" , ", "[walship] sources is empty: name at least one walship connection"),
        ("odd/conn", "[walship] sources: connection 'odd/conn': suffix 'odd/conn' cannot end a DAG id"),
    ],
)
def test_what_it_refuses_is_named(text: str, message: str) -> None:
    with pytest.raises(SourcesError) as raised:
        parse_sources(text)
    assert str(raised.value).startswith(message)
