"""Fault diagnosis: each symptom becomes the fault that names its processes, in words."""

from __future__ import annotations

import os

import tpustrategy as tps
from tpustrategy._src.cluster import diagnosis, exits, faults
from tpustrategy._src.cluster.faults import Peer

PEERS = {t: Peer(task=t, num_processes=3, address=f"10.0.0.{t}:2222", name=f"worker:{t}")
         for t in range(3)}


def test_a_fault_describes_and_addresses_each_culprit_and_keeps_its_reporter():
    found = diagnosis.fault(PEERS, 0, faults.STUCK, [2, 1], "is slow")
    assert found.culprits == (2, 1) and found.reporter == 0
    assert found.described == ("process 2 of 3 (worker:2, 10.0.0.2:2222)",
                               "process 1 of 3 (worker:1, 10.0.0.1:2222)")
    assert found.addresses == ("10.0.0.2:2222", "10.0.0.1:2222")
    assert str(found.exception()).startswith(
        "process 2 of 3 (worker:2, 10.0.0.2:2222) and process 1 of 3 (worker:1, 10.0.0.1:2222) "
        "is slow.\nFix: see what that process is doing")


def test_a_lost_link_is_an_unavailable_peer_with_exit_code_75():
    found = diagnosis.lost(PEERS, 0, 1)
    assert found.kind == faults.LOST and found.culprits == (1,) and found.exit_code == 75
    assert isinstance(found.exception(), tps.errors.UnavailableError)
    assert "was lost: its connection to this process closed without a goodbye" in found.detail


def test_silence_names_every_silent_peer_and_the_longest_silence():
    found = diagnosis.silent(PEERS, 0, {2: 7.4, 1: 12.6}, 10.0)
    assert found.kind == faults.STUCK and found.culprits == (1, 2) and found.exit_code == 76
    assert found.detail.startswith("has not answered for 13 s (heartbeat_timeout=10 s)")


def test_own_error_keeps_the_first_line_of_the_message_only():
    found = diagnosis.own_error(PEERS, 2, ValueError("boom\nsecond line"))
    assert found.kind == faults.ERROR and found.culprits == (2,) and found.reporter == 2
    assert found.peer_error == "ValueError: boom"
    assert diagnosis.own_error(PEERS, 2, KeyboardInterrupt()).peer_error == "KeyboardInterrupt"


def test_a_failed_collective_blames_departed_peers_and_a_timed_out_one_blames_quiet_peers():
    left = diagnosis.behind_collective(PEERS, 0, faults.LOST, [1], [2])
    assert left.kind == faults.LEFT and left.culprits == (1,)
    stuck = diagnosis.behind_collective(PEERS, 0, faults.TIMEOUT, [1], [2])
    assert stuck.kind == faults.STUCK and stuck.culprits == (2,)
    assert diagnosis.behind_collective(PEERS, 0, faults.LOST, [], [2]) is None
    assert diagnosis.behind_collective(PEERS, 0, faults.TIMEOUT, [1], []) is None


def test_leaving_the_exit_barrier_says_how_the_process_ended():
    normal = diagnosis.left_at_end(PEERS, 1, None, 30.0)
    assert normal.kind == faults.LEFT and normal.culprits == (1,)
    assert normal.detail == ("finished its program and left after waiting 30 s at the end for "
                             "the other processes")
    assert normal.fix == ""  # the default advice of "left": run the same steps
    failing = diagnosis.left_at_end(PEERS, 1, 3, 5.0)
    assert failing.detail.startswith("exited with code 3 and left after waiting 5 s")
    assert failing.fix == faults.DEFAULT_FIX[faults.LOST]


def test_the_late_peers_at_the_exit_barrier_are_missing_with_the_shutdown_advice():
    late = diagnosis.late_at_end(PEERS, 0, [1, 2], None, 5.0, 60.0)
    assert late.kind == faults.MISSING and late.culprits == (1, 2) and late.exit_code == 76
    assert late.detail == ("did not reach the end of the program within 5 s "
                           "(shutdown_timeout=60 s) after process 0 finished its program")
    assert "raise tps.initialize(shutdown_timeout=...)" in late.message()


def test_the_exit_path_knows_every_file_of_the_monitor():
    # A signal landing in these files is left to the code already handling the fault.
    assert {os.path.basename(f) for f in exits._OUR_FILES} == {
        "exits.py", "health.py", "diagnosis.py", "links.py"}
    assert all(os.path.exists(f) for f in exits._OUR_FILES)
