"""``walship zookeeper start|stop|status``: a local ZooKeeper server for the demo and tests."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from walship.cli.argtypes import port

__all__ = ["register"]

log = logging.getLogger(__name__)


def cmd_zookeeper(args: argparse.Namespace) -> int:
    from walship.zk.localserver import LocalZooKeeper

    server = LocalZooKeeper(Path(args.data_dir), args.port, host=args.host)
    if args.zk_command == "start":
        server.start()
        print(json.dumps({"ready": True, "zk": server.hosts, "pid_file": str(server.pid_file)}))
        return 0
    if args.zk_command == "status":
        running = server.is_running()
        print(f"{server.hosts}: {'running' if running else 'not answering'}")
        return 0 if running else 1
    stopped = server.stop()
    print(f"{'stopped' if stopped else 'no server to stop'} ({server.data_dir})")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    zk = sub.add_parser("zookeeper", help="a local ZooKeeper server for the demo and tests")
    zk_sub = zk.add_subparsers(dest="zk_command", required=True, metavar="ZK_COMMAND")
    for name, text in (
        ("start", "start it in the background"),
        ("stop", "stop it by its pid"),
        ("status", "say whether it answers"),
    ):
        z = zk_sub.add_parser(name, help=text)
        z.add_argument("--data-dir", required=True)
        z.add_argument("--port", type=port, default=2181)
        z.add_argument("--host", default="127.0.0.1")
        z.set_defaults(func=cmd_zookeeper)
