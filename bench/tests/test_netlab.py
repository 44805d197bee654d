"""The network lab (needs root and iproute2; skipped otherwise): htb_flows puts each flow in
its own class by port, and the delay line drops the share of packets it is asked to, and
none when asked for none. Everything runs in namespaces the test makes, on addresses that
exist only there. Run: python3 -m unittest discover -s bench/tests"""

import os
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelbench.netlab import (  # noqa: E402
    WAN_RECEIVER, DelayLine, Netns, htb_flows, veth,
)

# Sends UDP datagrams: argv[1] host, argv[2] port, argv[3] how many, then 20 ends (the line
# keeps the order of packets, so the receiver knows the data is over at the first end that
# arrives; with loss 0.5, all twenty are lost once in a million runs).
SEND = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
to = (sys.argv[1], int(sys.argv[2]))
for i in range(int(sys.argv[3])):
    s.sendto(b"data %d" % i + bytes(100), to)
for _ in range(20):
    s.sendto(b"end", to)
"""

# Counts the data datagrams that arrive on argv[1]:argv[2] until the first end; says `ready`
# once bound.
RECEIVE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(30)
print("ready", flush=True)
n = 0
while s.recv(2048) != b"end":
    n += 1
print(n, flush=True)
"""

ROOT = os.geteuid() == 0 and shutil.which("ip") and shutil.which("tc")


def run_in(ns: Netns, script: str, *args: str) -> str:
    r = subprocess.run(ns.argv([sys.executable, "-c", script, *args]), capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"{script.strip().splitlines()[0]}...: {r.stderr.strip()}")
    return r.stdout


def class_bytes(ns: Netns, dev: str) -> dict[str, int]:
    """Bytes sent through each htb class of `dev`, by class id (`tc -s class show`)."""
    out = subprocess.run(["tc", "-n", ns.name, "-s", "class", "show", "dev", dev],
                         capture_output=True, text=True, check=True).stdout
    sent, classid = {}, None
    for line in out.splitlines():
        words = line.split()
        if words[:2] == ["class", "htb"]:
            classid = words[2]
        elif words[:1] == ["Sent"] and classid:
            sent[classid] = int(words[1])
    return sent


@unittest.skipUnless(ROOT, "needs root, ip and tc")
class NetlabTest(unittest.TestCase):
    def test_htb_flows_classifies_each_flow_by_its_port(self) -> None:
        with Netns("htb-a") as a, Netns("htb-b") as b:
            dev_a, _ = veth(a, b, "10.213.8.1", "10.213.8.2")
            htb_flows(a.name, dev_a, {9401: "100mbit", 9402: "50mbit"})
            run_in(a, SEND, "10.213.8.2", "9402", "50")
            sent = class_bytes(a, dev_a)
        # 50 datagrams of 100+ bytes, and the 20 ends of 3, each with 28 bytes of headers.
        self.assertGreaterEqual(sent["1:11"], 50 * 134 + 20 * 31)
        self.assertEqual(sent["1:10"], 0)

    def test_the_delay_line_drops_what_it_is_asked_to(self) -> None:
        for loss, least, most in ((0.0, 200, 200), (0.5, 40, 160)):
            with Netns("loss-a") as a, Netns("loss-b") as b, DelayLine(a, b, loss=loss):
                receiver = subprocess.Popen(
                    b.argv([sys.executable, "-c", RECEIVE, WAN_RECEIVER, "9403"]),
                    stdout=subprocess.PIPE, text=True)
                try:
                    self.assertEqual(receiver.stdout.readline().strip(), "ready")
                    run_in(a, SEND, WAN_RECEIVER, "9403", "200")
                    got = int(receiver.stdout.readline())
                finally:
                    receiver.kill()
                    receiver.wait()
                    receiver.stdout.close()
            with self.subTest(loss=loss):
                self.assertTrue(least <= got <= most, f"{got} of 200 arrived with loss {loss}")


if __name__ == "__main__":
    unittest.main()
