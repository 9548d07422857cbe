"""The interpreter's settings while passes ship (walship.replicate.interpreter)."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from walship.replicate.interpreter import PASS_SWITCH_INTERVAL, PASS_THRESHOLD, pass_settings


def test_passes_share_the_settings_and_the_last_to_end_restores_the_processs_own() -> None:
    before_threshold, before_interval = gc.get_threshold(), sys.getswitchinterval()
    assert before_interval > PASS_SWITCH_INTERVAL and before_threshold[0] < PASS_THRESHOLD
    inside = threading.Event()
    leave = threading.Event()
    seen: list[tuple[tuple[int, int, int], float]] = []

    def other_pass() -> None:
        with pass_settings():
            inside.set()
            leave.wait(30)
        seen.append((gc.get_threshold(), sys.getswitchinterval()))

    with pass_settings():
        assert gc.get_threshold()[0] == PASS_THRESHOLD
        assert sys.getswitchinterval() == pytest.approx(PASS_SWITCH_INTERVAL)
        thread = threading.Thread(target=other_pass)
        thread.start()
        assert inside.wait(30)
    # this pass ended first: the other still runs with the pass's settings
    assert gc.get_threshold()[0] == PASS_THRESHOLD
    assert sys.getswitchinterval() == pytest.approx(PASS_SWITCH_INTERVAL)
    leave.set()
    thread.join(30)
    assert seen == [(before_threshold, before_interval)]
    assert gc.get_threshold() == before_threshold and sys.getswitchinterval() == before_interval


def test_a_process_that_turned_collection_off_or_switches_sooner_keeps_its_own() -> None:
    saved_threshold, saved_interval = gc.get_threshold(), sys.getswitchinterval()
    try:
        gc.set_threshold(0)
        sys.setswitchinterval(0.0001)
        mine = sys.getswitchinterval()  # as the interpreter keeps it (in microseconds)
        with pass_settings():
            assert gc.get_threshold()[0] == 0 and sys.getswitchinterval() == mine
        assert gc.get_threshold()[0] == 0 and sys.getswitchinterval() == mine
    finally:
        gc.set_threshold(*saved_threshold)
        sys.setswitchinterval(saved_interval)
