#!/usr/bin/env python3
"""The layers of the tree, checked: every #include "dir/file.h" must go down.

A room is a top-level folder, except api/, whose sub-folders are rooms of their own
(and cm/router, a room above cm). A file may include its own room and the rooms of
lower layers, never a room of its own layer or above, so no two rooms include each
other (the cycle this guards against: verbs/ including cm/rdma_cm.h while
cm/uscm_cma.cc included verbs/). Prints each violation and a last line
"layers: N passed, N failed" (one check per room) for tests/run.sh.

  tools/check_layers.py [ROOT]
"""
import os
import re
import subprocess
import sys

# Lowest first. Rooms of one layer may not include each other.
LAYERS = [
    ["mad"],                      # time, timers, transports, wire formats, captures, sim
    ["sa"],                       # the SA client and the simulated SA
    ["cm"],                       # the CM protocol core and its runtime
    ["cm/router", "verbs"],       # uscmd's router; libibverbs and netdev side
    ["api/rdma_cm"],              # the rdma_cm-style C++ API
    ["api/c", "api/fi_cm"],       # the C API; fi_cm semantics
    ["api/librdmacm"],            # the drop-in librdmacm.so.1
    ["tools"],                    # uscm, uscmd
    ["tests"],                    # harnesses, benches, VM lane
]
RANK = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def room_of(path):
    parts = path.split("/")
    for n in (2, 1):  # the longest listed prefix
        room = "/".join(parts[:n])
        if room in RANK and len(parts) > n:
            return room
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    os.chdir(root)
    files = subprocess.check_output(["git", "ls-files", "*.h", "*.cc", "*.c"], text=True).split()
    bad = {}
    for f in files:
        src = room_of(f)
        if src is None:
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = re.match(r'#include "([^"]+)"', line)
                if not m or not os.path.exists(m.group(1)):
                    continue  # a system or third-party header
                dst = room_of(m.group(1))
                if dst is None or dst == src or RANK[dst] < RANK[src]:
                    continue
                bad.setdefault(src, []).append(
                    f"{f}:{n}: {src} (layer {RANK[src]}) includes {m.group(1)} "
                    f"({dst}, layer {RANK[dst]})")
    for src in sorted(bad):
        for line in bad[src]:
            print(line)
    print(f"layers: {len(RANK) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
