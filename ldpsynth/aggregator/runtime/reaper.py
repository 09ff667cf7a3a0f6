"""The reaper: ends the embedded runtime's helper processes when the aggregator dies, even by SIGKILL.

An aggregator that starts its own Ray runtime and NATS server owns their processes. A graceful
stop ends them; a SIGKILL cannot run any code, and Ray's agent processes (children of the
raylet) then linger for about a minute, keeping ports and files. So the aggregator starts this
small process in its own session, hands it the processes to end (pid and start time, so a reused
pid is never hit) and keeps a pipe to it open. When the pipe closes (the aggregator is gone, for
whatever reason) the reaper sends SIGKILL to every listed process still running and says which.

Linux only (``/proc``); elsewhere it does nothing. Run as ``python -m ldpsynth.aggregator.runtime.reaper``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

PROC = Path("/proc")


def start_time(pid: int) -> int | None:
    """The running process's start time in clock ticks since boot (``None``: no such process, or a
    zombie: a process that has exited and not yet been reaped by its parent)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def descendants(pid: int) -> list[int]:
    """Every living descendant of ``pid`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, frontier = [], [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child)
    return found


def describe(pids: Iterable[int]) -> list[dict[str, object]]:
    """``[{"pid", "start", "name"}]`` of the living processes among ``pids`` (name: ``/proc/PID/comm``)."""
    targets = []
    for pid in pids:
        started = start_time(pid)
        if started is None:
            continue
        try:
            name = (PROC / str(pid) / "comm").read_text().strip()
        except OSError:
            continue
        targets.append({"pid": pid, "start": started, "name": name})
    return targets


def start_reaper(targets: Sequence[dict[str, object]]) -> subprocess.Popen[bytes] | None:
    """Start a reaper for ``targets``; keep the returned process's stdin open until you exit."""
    if not PROC.is_dir() or not targets:
        return None
    reaper = subprocess.Popen([sys.executable, "-m", "ldpsynth.aggregator.runtime.reaper"], stdin=subprocess.PIPE,
                              start_new_session=True, close_fds=True)
    assert reaper.stdin is not None
    reaper.stdin.write((json.dumps(list(targets)) + "\n").encode("utf-8"))
    reaper.stdin.flush()
    return reaper


def stop_reaper(reaper: subprocess.Popen[bytes] | None) -> None:
    """Dismiss a reaper after a graceful stop (its targets have exited or are exiting)."""
    if reaper is None:
        return
    reaper.kill()
    reaper.wait()
    if reaper.stdin is not None:
        reaper.stdin.close()


def reap(targets: Sequence[dict[str, object]]) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """SIGKILL every target still running; return (killed, already gone)."""
    killed, gone = [], []
    for target in targets:
        pid = int(target["pid"])  # type: ignore[call-overload]
        if start_time(pid) != target["start"]:
            gone.append(target)
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(target)
        except ProcessLookupError:
            gone.append(target)
    return killed, gone


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    targets = json.loads(sys.stdin.readline() or "[]")
    while sys.stdin.buffer.read(65536):  # returns b"" once the aggregator has closed the pipe or died
        pass
    killed, _ = reap(targets)
    # No guess at the cause: Ray's processes also end when the aggregator is killed, so one found gone
    # says nothing of which went first. (A raylet that dies first is reported by the aggregator itself.)
    if killed:
        names = ", ".join(sorted({str(t.get("name")) for t in killed}))
        print(f"ldpsynth aggregator: the aggregator ended without stopping its helper processes; ended {names}",
              file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
