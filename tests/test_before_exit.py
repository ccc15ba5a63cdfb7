"""Work left for the end of the program runs before the interpreter finalizes, on every Python.

Each case is a fresh interpreter whose callback needs what finalization takes away
(new threads, ``concurrent.futures``); the callback writes a file only if it got them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ARM = textwrap.dedent("""
    import concurrent.futures, sys, threading
    from tpustrategy._src import before_exit

    OUT = sys.argv[1]
    state = {"busy": True, "runs": 0}

    def finish():
        state["runs"] += 1
        with concurrent.futures.ThreadPoolExecutor(2) as pool:  # threads, started now
            value = pool.submit(lambda: 6 * 7).result()
        with open(OUT, "a") as f:
            f.write(f"{value} run {state['runs']}\\n")
        state["busy"] = False

    def start():
        before_exit.arm(finish, lambda: state["busy"])
""")


def _run(tmp_path, body: str, *, as_file: bool = True) -> tuple[subprocess.CompletedProcess[str], str]:
    out = str(tmp_path / "out.txt")
    source = ARM + textwrap.dedent(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPS_")}
    env["PYTHONPATH"] = REPO
    if as_file:
        script = tmp_path / "main.py"
        script.write_text(source)
        command = [sys.executable, str(script), out]
    else:
        command = [sys.executable, "-c", source, out]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    written = open(out).read() if os.path.exists(out) else ""
    return proc, written


@pytest.mark.parametrize("as_file", [True, False], ids=["script", "dash-c"])
def test_the_callback_runs_once_with_threads_when_the_main_module_returns(tmp_path, as_file):
    proc, written = _run(tmp_path, "start()\nprint('main done')\n", as_file=as_file)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "main done" and written == "42 run 1\n"


def test_the_callback_runs_when_the_program_ends_by_sys_exit_and_the_code_is_kept(tmp_path):
    proc, written = _run(tmp_path, "def main():\n    start()\n    return 3\nsys.exit(main())\n")
    assert proc.returncode == 3 and written == "42 run 1\n", proc.stderr[-2000:]


def test_the_callback_runs_when_the_program_dies_of_an_exception(tmp_path):
    proc, written = _run(tmp_path, "start()\nraise KeyError('boom')\n")
    assert proc.returncode == 1 and "KeyError: 'boom'" in proc.stderr and written == "42 run 1\n"


def test_work_armed_from_another_thread_is_waited_for_too(tmp_path):
    proc, written = _run(tmp_path, "t = threading.Thread(target=start)\nt.start()\nt.join()\n")
    assert proc.returncode == 0 and written == "42 run 1\n", proc.stderr[-2000:]


def test_nothing_runs_when_the_work_is_done_before_the_end(tmp_path):
    proc, written = _run(tmp_path, "start()\nfinish()\n")
    assert proc.returncode == 0 and written == "42 run 1\n", proc.stderr[-2000:]


def test_a_failing_callback_is_logged_and_the_exit_code_is_kept(tmp_path):
    body = ("def finish():\n    raise OSError('disk gone')\n"
            "before_exit.arm(finish, lambda: True)\nsys.exit(5)\n")
    proc, written = _run(tmp_path, body)
    assert proc.returncode == 5 and "disk gone" in proc.stderr and written == ""


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring is new in Python 3.12")
def test_the_unwind_listener_turns_itself_off_once_nothing_is_left(tmp_path):
    body = textwrap.dedent("""
        start()
        tool = next(t for t in (3, 4) if sys.monitoring.get_tool(t) == "tpustrategy.before_exit")
        assert sys.monitoring.get_events(tool) == sys.monitoring.events.PY_UNWIND
        finish()
        def fails():
            raise ValueError

        try:
            fails()  # the exception leaves a frame: an unwind, which now sees nothing busy
        except ValueError:
            pass
        print(sys.monitoring.get_events(tool))
    """)
    proc, _ = _run(tmp_path, body)
    assert proc.returncode == 0 and proc.stdout.strip() == "0", proc.stderr[-2000:]
