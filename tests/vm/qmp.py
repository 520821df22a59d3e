#!/usr/bin/python3
"""tests/vm/qmp.py - one QMP command to a running qemu, for 68-dropin-qemu.

  qmp.py SOCKET COMMAND [ARGUMENTS-AS-JSON]   prints the command's "return" as JSON
  qmp.py SOCKET wait-migrate SECONDS          polls query-migrate until its status is
                                              completed, failed or cancelled; prints
                                              the last answer; exit 0 only for completed

Every wait is bounded on the clock; the socket is qemu's `-qmp unix:SOCKET,server=on,
wait=off`, tried until it accepts (qemu may not have opened it yet) for at most 60 s.
Exit status 1 on a QMP error (printed), 2 on a wait that ran out.
"""
import json
import socket
import sys
import time


class Qmp:
    def __init__(self, path, bound=60.0):
        end = time.monotonic() + bound
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() > end:
                    print(f"qmp.py: no qemu on {path} after {bound:.0f} s: {e}")
                    sys.exit(2)
                time.sleep(0.1)
        self.file = self.sock.makefile("rw")
        self._read()  # the greeting
        self.execute("qmp_capabilities")

    def _read(self):
        while True:
            line = self.file.readline()
            if not line:
                print("qmp.py: qemu closed the socket")
                sys.exit(1)
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
            print(f"qmp.py: {command}: {msg['error'].get('desc', msg['error'])}")
            sys.exit(1)
        return msg["return"]


def main():
    path, command = sys.argv[1], sys.argv[2]
    qmp = Qmp(path)
    if command == "wait-migrate":
        end = time.monotonic() + float(sys.argv[3])
        while True:
            info = qmp.execute("query-migrate")
            status = info.get("status")
            if status in ("completed", "failed", "cancelled"):
                print(json.dumps(info, sort_keys=True))
                sys.exit(0 if status == "completed" else 1)
            if time.monotonic() > end:
                print(json.dumps(info, sort_keys=True))
                print(f"qmp.py: migration still {status} after {sys.argv[3]} s")
                sys.exit(2)
            time.sleep(0.2)
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    print(json.dumps(qmp.execute(command, args), sort_keys=True))


if __name__ == "__main__":
    main()
