#!/usr/bin/env python3
"""A lossy, slow link between two network namespaces, for kernels without sch_netem: a TUN
device named IFNAME in each namespace, and this process between them forwarding each IP packet
after DELAY ms, dropping a fraction LOSS of them (each direction on its own, as netem on both ends
of a veth pair would).

    lossy_link.py NS_A NS_B IFNAME DELAY_MS LOSS SEED

Prints "READY" once both devices exist (the caller then gives them addresses and brings them up)
and forwards until SIGTERM or SIGKILL; the devices go with this process (they are not persistent).
"""

import ctypes
import fcntl
import heapq
import os
import random
import select
import signal
import struct
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def open_tun(libc, ns, name):
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
    finally:
        os.close(fd)
    tun = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(tun, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return tun


def main():
    ns_a, ns_b, ifname = sys.argv[1], sys.argv[2], sys.argv[3]
    delay = float(sys.argv[4]) / 1000.0
    loss = float(sys.argv[5])
    rng = random.Random(int(sys.argv[6]))
    libc = ctypes.CDLL(None, use_errno=True)
    tuns = [open_tun(libc, ns_a, ifname), open_tun(libc, ns_b, ifname)]
    other = {tuns[0]: tuns[1], tuns[1]: tuns[0]}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("READY", flush=True)
    queue, seq = [], 0  # (due, seq, fd, packet)
    forwarded = dropped = 0
    while True:
        timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else 1.0
        ready, _, _ = select.select(tuns, [], [], timeout)
        for fd in ready:
            while True:
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:  # the interface went down: nothing to read now
                    break
                if rng.random() < loss:
                    dropped += 1
                    continue
                seq += 1
                heapq.heappush(queue, (time.monotonic() + delay, seq, other[fd], pkt))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, fd, pkt = heapq.heappop(queue)
            try:
                os.write(fd, pkt)
                forwarded += 1
            except OSError:  # the receiving side is down or full: lost, as on a wire
                dropped += 1


if __name__ == "__main__":
    main()
