"""The queues of a ResourceManager's scheduler answer (``/ws/v1/cluster/scheduler``), as the
Capacity Scheduler and the Fair Scheduler write it, and the archive given to ``--archives``."""

from __future__ import annotations

from typing import Any

from walship.spark.yarn import ENV_ALIAS, split_archive, walk_queues

CAPACITY: dict[str, Any] = {
    "type": "capacityScheduler",
    "queueName": "root",
    "queues": {
        "queue": [
            {"queueName": "default", "type": "capacitySchedulerLeafQueueInfo"},
            {"queueName": "etl", "queues": {"queue": [{"queueName": "walship"}, {"queueName": "nightly"}]}},
        ]
    },
}
FAIR: dict[str, Any] = {
    "queueName": "root",
    "childQueues": {
        "queue": [
            {"queueName": "root.default"},
            {"queueName": "root.etl", "childQueues": {"queue": {"queueName": "root.etl.walship"}}},
        ]
    },
}


def test_the_capacity_scheduler_s_queues_by_leaf_name_and_path() -> None:
    walked = {path: (leaf, is_leaf) for leaf, path, is_leaf in walk_queues(CAPACITY, "")}
    assert walked == {
        "root": ("root", False),
        "root.default": ("default", True),
        "root.etl": ("etl", False),
        "root.etl.walship": ("walship", True),
        "root.etl.nightly": ("nightly", True),
    }


def test_the_fair_scheduler_s_queues_by_leaf_name_and_path() -> None:
    walked = {path: (leaf, is_leaf) for leaf, path, is_leaf in walk_queues(FAIR, "")}
    assert walked == {
        "root": ("root", False),
        "root.default": ("default", True),
        "root.etl": ("etl", False),
        "root.etl.walship": ("walship", True),
    }


def test_an_archive_unpacks_as_walship_env_unless_it_names_its_alias() -> None:
    assert split_archive("hdfs:///apps/env.tar.gz") == ("hdfs:///apps/env.tar.gz", ENV_ALIAS)
    assert split_archive("/opt/env.tar.gz#py") == ("/opt/env.tar.gz", "py")
