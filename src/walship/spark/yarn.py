"""What a Spark submit to YARN is checked for before it starts, so that a bad setting is one
line naming it at the task's start, never a submit that waits in a queue that does not exist
or a job that dies in its container: the queue, asked of the ResourceManager's REST API
(``/ws/v1/cluster/scheduler``, Capacity and Fair Scheduler alike), and the packed environment
(``--archives``), looked up on its file system.

    check_queue("http://rm:8088", "etl")        # SparkSetupError naming the queues there
    check_archive("hdfs://nn:8020/apps/walship-env.tar.gz#walship-env")
"""

from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import requests

from walship.errors import SparkSetupError, YarnUnavailableError
from walship.files import url_to_fs

__all__ = [
    "ENV_ALIAS",
    "check_archive",
    "check_queue",
    "queue_names",
    "split_archive",
    "walk_queues",
    "webapp_from_conf",
]

log = logging.getLogger(__name__)

#: The directory a packed environment unpacks to in every YARN container (``archive#alias``);
#: its ``bin/python`` runs the driver and the executors.
ENV_ALIAS = "walship-env"
#: How long the ResourceManager has to answer, in seconds.
TIMEOUT = 10.0


def webapp_from_conf(conf_dir: str | None = None) -> str | None:
    """The ResourceManager's web address from ``yarn-site.xml`` in ``conf_dir`` (default
    ``$HADOOP_CONF_DIR``, then ``$YARN_CONF_DIR``), as a URL; ``None`` when none names it."""
    dirs = [conf_dir] if conf_dir else [os.environ.get("HADOOP_CONF_DIR"), os.environ.get("YARN_CONF_DIR")]
    for d in dirs:
        if not d:
            continue
        path = os.path.join(d, "yarn-site.xml")
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):
            continue
        for prop in root.iter("property"):
            if (prop.findtext("name") or "").strip() == "yarn.resourcemanager.webapp.address":
                value = (prop.findtext("value") or "").strip()
                if value:
                    return value if "://" in value else f"http://{value}"
    return None


def walk_queues(queue: dict[str, Any], parent: str) -> Iterator[tuple[str, str, bool]]:
    """(leaf name, full path, is a leaf) of a scheduler queue and the queues under it."""
    name = str(queue.get("queueName", ""))
    path = name if name.startswith("root") or not parent else f"{parent}.{name}"
    children = queue.get("queues") or queue.get("childQueues") or {}
    subs = children.get("queue", []) if isinstance(children, dict) else children
    if isinstance(subs, dict):
        subs = [subs]
    yield name.rsplit(".", 1)[-1], path, not subs
    for sub in subs:
        yield from walk_queues(sub, path)


def queue_names(webapp: str, auth: Any = None) -> dict[str, bool]:
    """Every queue the ResourceManager at ``webapp`` schedules, by leaf name and by full path
    (``root.etl``), each mapped to whether it is a leaf (only leaves take applications).

    :raises SparkSetupError: the ResourceManager does not answer or answers something else.
    """
    url = f"{webapp.rstrip('/')}/ws/v1/cluster/scheduler"
    try:
        response = requests.get(url, auth=auth, timeout=TIMEOUT, headers={"Accept": "application/json"})
        response.raise_for_status()
        info = response.json()["scheduler"]["schedulerInfo"]
    except requests.RequestException as exc:
        raise YarnUnavailableError(
            f"YARN ResourceManager {webapp} does not answer ({type(exc).__name__}: {exc})"
        ) from None
    except (ValueError, KeyError, TypeError):
        raise SparkSetupError(f"YARN ResourceManager {webapp}: {url} is not the scheduler's REST answer") from None
    root = info.get("rootQueue") or {**info, "queueName": info.get("queueName", "root")}
    names: dict[str, bool] = {}
    for leaf, path, is_leaf in walk_queues(root, ""):
        names[path] = is_leaf
        names.setdefault(leaf, is_leaf)
    return names


def check_queue(webapp: str, queue: str, auth: Any = None, *, what: str = "YARN queue") -> None:
    """Nothing when ``queue`` is a leaf queue of the ResourceManager at ``webapp``.

    :raises SparkSetupError: it is not (the message names the queue, the ResourceManager and
        its leaf queues), or the ResourceManager does not answer.
    """
    names = queue_names(webapp, auth)
    if names.get(queue) or names.get(queue.removeprefix("root.")):
        return
    leaves = sorted(n for n, leaf in names.items() if leaf and "." not in n)
    if queue in names:
        raise SparkSetupError(
            f"{what} {queue!r} at ResourceManager {webapp} is a parent queue: applications go to a "
            f"leaf queue ({', '.join(leaves)})"
        )
    raise SparkSetupError(
        f"{what} {queue!r} does not exist at ResourceManager {webapp} (its queues: {', '.join(leaves) or 'none'})"
    )


def split_archive(archive: str) -> tuple[str, str]:
    """``(location, alias)`` of spark-submit's ``--archives`` value ``location[#alias]``; the
    alias defaults to :data:`ENV_ALIAS`."""
    location, _, alias = archive.partition("#")
    return location, alias or ENV_ALIAS


def check_archive(archive: str, *, what: str = "Spark archive") -> None:
    """Nothing when the archive (``path``, ``file://``, ``hdfs://``, ``webhdfs://``... with an
    optional ``#alias``) is a file.

    :raises SparkSetupError: it is missing, a folder, or its file system cannot be reached
        (the message names it).
    """
    location, _ = split_archive(archive)
    if not location.strip():
        raise SparkSetupError(f"{what} is empty: give the packed environment's path or URL")
    try:
        fs, path = url_to_fs(location)
        found = fs.isfile(path)
    except (OSError, ValueError, ImportError) as exc:
        raise SparkSetupError(f"{what} {location}: cannot be looked up ({type(exc).__name__}: {exc})") from None
    if not found:
        raise SparkSetupError(f"{what} {location} does not exist (build one with `walship spark pack`)")
