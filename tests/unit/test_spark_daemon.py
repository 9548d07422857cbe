"""walship's Spark daemon loads what the tasks import before pyspark's daemon forks, and starts
no thread doing so (pyspark forks its workers from it: a thread would not survive a fork)."""

from __future__ import annotations

import subprocess
import sys

from walship.spark.daemon import PRELOADED


def test_preloading_starts_no_thread_and_loads_the_task_modules() -> None:
    code = (
        "import os, sys\n"
        "from walship.spark.daemon import preload\n"
        "preload()\n"
        "print(len(os.listdir('/proc/self/task')))\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith(('walship.spark.', 'pyspark.worker')))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    threads, loaded = int(out[0]), set(out[1].split(","))
    assert threads == 1
    assert set(PRELOADED) <= loaded
