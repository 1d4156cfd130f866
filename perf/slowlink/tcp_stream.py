#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Raw TCP stream over one emulated link: the rate tbf actually delivers.

  tcp_stream.py recv ADDR PORT            accept one connection, print received Mbit/s
  tcp_stream.py send ADDR PORT SECONDS    connect and send for SECONDS
The receiver measures from its first to its last byte, so connection setup is not counted.
"""
import socket
import sys
import time


def recv(addr, port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((addr, port))
        srv.listen(1)
        srv.settimeout(30)
        conn, _ = srv.accept()
        with conn:
            buf = bytearray(1 << 20)
            total, first, last = 0, None, None
            while True:
                n = conn.recv_into(buf)
                if n == 0:
                    break
                now = time.monotonic()
                first = first if first is not None else now
                last = now
                total += n
    seconds = (last - first) if first is not None and last > first else float("nan")
    print(f"bytes={total} seconds={seconds:.3f} mbit_per_s={total * 8 / seconds / 1e6:.1f}")


def send(addr, port, seconds):
    payload = bytes(1 << 20)
    deadline = time.monotonic() + seconds
    for _ in range(100):
        try:
            sock = socket.create_connection((addr, port), timeout=10)
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise SystemExit(f"cannot connect to {addr}:{port}")
    with sock:
        while time.monotonic() < deadline:
            sock.sendall(payload)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "recv":
        recv(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
