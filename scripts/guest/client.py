#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
# The host's end of a guest's command channel (scripts/guest.sh run): sends one command to the agent that
# scripts/guest/init.sh runs on a virtio-serial port, prints the command's stdout and stderr and exits with
# its status. The request and the reply are one line each, base64 inside, so the bytes cross unchanged.
#   usage: client.py SOCKET TIMEOUT_S COMMAND
import base64
import socket
import sys


def main():
    if len(sys.argv) != 4:
        print("usage: client.py SOCKET TIMEOUT_S COMMAND", file=sys.stderr)
        return 2
    path, timeout, command = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        sock.sendall(base64.b64encode(command.encode()) + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            reply += chunk
    except (OSError, socket.timeout) as e:
        print(f"mrcheck: guest: no answer on {path}: {e}", file=sys.stderr)
        return 125
    fields = reply.rstrip(b"\r\n").split(b" ")
    if len(fields) != 3 or not fields[0].isdigit():
        print(f"mrcheck: guest: a reply that is not 'RC OUT ERR' on {path} ({len(reply)} bytes)", file=sys.stderr)
        return 125
    sys.stdout.buffer.write(base64.b64decode(fields[1]))
    sys.stderr.buffer.write(base64.b64decode(fields[2]))
    return int(fields[0])


if __name__ == "__main__":
    sys.exit(main())
