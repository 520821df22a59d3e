#!/usr/bin/python3
"""tests/vm/qmp.py - QMP commands to a running qemu, in order, over one connection
(for 68-dropin-qemu).

  qmp.py SOCKET STEP...
    COMMAND               prints the command's "return" as one line of JSON
    COMMAND=ARGUMENTS     the same, with ARGUMENTS (a JSON object)
    wait-migrate=SECONDS  polls query-migrate until its status is completed, failed or
                          cancelled; prints the last answer; fails unless completed

The socket is qemu's `-qmp unix:SOCKET,server=on,wait=off`, tried until it accepts (qemu
may not have opened it yet) for at most 60 s; every wait is bounded on the clock. Exit
status 0 when every step succeeded; 1 at the first QMP error or migration that did not
complete (printed), 2 at a wait that ran out.
"""
import json
import socket
import sys
import time


class Qmp:
    def __init__(self, path, bound=60.0):
        end = time.monotonic() + bound
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(path)
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() > end:
                    sys.exit(f"qmp.py: no qemu on {path} after {bound:.0f} s: {e}")
                time.sleep(0.1)
        self.file = self.sock.makefile("rw")
        self._read()  # the greeting
        self.execute("qmp_capabilities")

    def _read(self):
        while True:
            line = self.file.readline()
            if not line:
                sys.exit("qmp.py: qemu closed the socket")
            msg = json.loads(line)
            if "event" not in msg:  # events (MIGRATION, STOP...) are not answers
                return msg

    def execute(self, command, arguments=None):
        req = {"execute": command}
        if arguments:
            req["arguments"] = arguments
        self.file.write(json.dumps(req) + "\n")
        self.file.flush()
        msg = self._read()
        if "error" in msg:
            sys.exit(f"qmp.py: {command}: {msg['error'].get('desc', msg['error'])}")
        return msg["return"]

    def wait_migrate(self, seconds):
        end = time.monotonic() + seconds
        while True:
            info = self.execute("query-migrate")
            status = info.get("status")
            if status in ("completed", "failed", "cancelled"):
                print(json.dumps(info, sort_keys=True), flush=True)
                if status != "completed":
                    sys.exit(f"qmp.py: migration {status}")
                return
            if time.monotonic() > end:
                print(json.dumps(info, sort_keys=True), flush=True)
                print(f"qmp.py: migration still {status} after {seconds:.0f} s")
                sys.exit(2)
            time.sleep(0.2)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    qmp = Qmp(sys.argv[1])
    for step in sys.argv[2:]:
        command, _, value = step.partition("=")
        if command == "wait-migrate":
            qmp.wait_migrate(float(value))
        else:
            ret = qmp.execute(command, json.loads(value) if value else None)
            print(json.dumps(ret, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
