"""The ssh measure's pure parts (whether an accel offers ssh://, the far end's stamps, ratios
paired by round, the goals' verdicts, the rows' command lines) and, with root and
openssh-server, its lab: the bench's own sshd in a namespace, reached with host key checking
on through the lab's known_hosts, and a namespace that takes its leftover processes with it.
Run: python3 -m unittest discover -s bench/tests"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelbench.measures import ssh  # noqa: E402
from accelbench.netlab import (  # noqa: E402
    BytesBeside, Netns, SshLab, Sshd, known_hosts_line, veth,
)

HELP_34 = """Between hosts:
      --to <ADDR>   ADDR, or ssh://[USER@]HOST[:PORT] to start the far end through ssh
      --via <PATH>  auto, direct or ssh
      --ssh-command <CMD>
      --remote-accel <PATH>
"""


def runs(steady: dict[int, float], first: dict[int, float] | None = None,
         skipped: str | None = None) -> ssh.Runs:
    return ssh.Runs(steady=dict(steady), first=dict(first or {}), skipped=skipped)


class SupportTest(unittest.TestCase):
    def test_an_accel_with_issue_34s_options_is_driven(self) -> None:
        self.assertIsNone(ssh.ssh_support(HELP_34))

    def test_an_accel_without_them_is_skipped_naming_what_it_lacks(self) -> None:
        why = ssh.ssh_support(HELP_34.replace("--via", "--path"))
        self.assertIn("`--via`", why)
        self.assertNotIn("ssh://", why)
        why = ssh.ssh_support("  --to <ADDR>  host:port\n  --key-file <FILE>\n")
        for word in ssh.SSH_WORDS:
            self.assertIn(f"`{word}`", why)


class StampsTest(unittest.TestCase):
    def test_every_stamp_is_read(self) -> None:
        self.assertEqual(ssh.read_stamps("first 12.5\nhalf 16\nall 20.25\n"), (12.5, 16.0, 20.25))

    def test_a_missing_or_garbled_stamp_is_none(self) -> None:
        self.assertEqual(ssh.read_stamps("first 3.0\n"), (3.0, None, None))
        self.assertEqual(ssh.read_stamps("first x\nall\nhalf 2\n"), (None, 2.0, None))
        self.assertEqual(ssh.read_stamps(""), (None, None, None))

    def test_the_reader_stamps_its_first_byte_half_and_all_in_order(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            stamps = Path(d) / "stamps"
            r = subprocess.run([sys.executable, ssh.READER, "3000000", "--stamps", str(stamps)],
                               input=bytes(3000000), capture_output=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            first, half, last = ssh.read_stamps(stamps.read_text())
        self.assertTrue(first <= half <= last, (first, half, last))
        # A short stream is refused, and says what it did get.
        with tempfile.TemporaryDirectory() as d:
            stamps = Path(d) / "stamps"
            r = subprocess.run([sys.executable, ssh.READER, "3000000", "--stamps", str(stamps)],
                               input=bytes(1000000), capture_output=True, timeout=60)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(ssh.read_stamps(stamps.read_text())[1:], (None, None))


class RatioTest(unittest.TestCase):
    def test_speedups_pair_the_runs_of_the_same_round(self) -> None:
        # Round 1 of the row failed and round 2 of the base: only rounds 0 and 3 pair.
        row = {0: 2.0, 2: 1.0, 3: 4.0}
        base = {0: 5.0, 1: 9.0, 3: 6.0}
        self.assertEqual(ssh.speedups(row, base), [2.5, 1.5])

    def test_lags_are_the_rows_seconds_minus_the_bases(self) -> None:
        self.assertEqual(ssh.lags({0: 0.7, 1: 0.5}, {0: 0.5, 1: 0.6}), [0.7 - 0.5, 0.5 - 0.6])

    def test_the_verdict_goes_by_the_median_and_says_when_rounds_disagree(self) -> None:
        at_least_1 = lambda x: x >= 1.0  # noqa: E731
        self.assertEqual(ssh.verdict([1.1, 1.2, 1.3], at_least_1), "**met**")
        self.assertEqual(ssh.verdict([0.5, 0.9, 0.8], at_least_1), "**NOT met**")
        self.assertTrue(ssh.verdict([0.9, 1.1, 1.2], at_least_1).startswith("**met** (some"))
        self.assertTrue(ssh.verdict([0.9, 0.95, 1.2], at_least_1).startswith("**NOT met** (some"))
        self.assertEqual(ssh.verdict([], at_least_1), "not measured")


class GoalsTest(unittest.TestCase):
    def table(self, direct: float, through: float, skipped: str | None = None
              ) -> dict[str, ssh.Runs]:
        """Three rounds: ssh's second half takes 3 s and its first byte 0.5 s, aes128-gcm's
        2 s; the accel rows' `direct` and `through` s, their first byte 0.1 s after ssh's."""
        return {
            ssh.SSH: runs({0: 3.0, 1: 3.0, 2: 3.0}, {0: 0.5, 1: 0.5, 2: 0.5}),
            ssh.AES: runs({0: 2.0, 1: 2.0, 2: 2.0}),
            ssh.MBUFFER: runs({}),
            ssh.DIRECT: runs({0: direct, 1: direct, 2: direct}, {0: 0.6, 1: 0.6, 2: 0.6},
                             skipped),
            ssh.THROUGH: runs({0: through, 1: through, 2: through}, {0: 0.6, 1: 0.6, 2: 0.6},
                              skipped),
        }

    def test_on_veth_direct_is_held_to_the_faster_plain_ssh(self) -> None:
        # 0.75 s: 4 × the default cipher's 3 s, but only 2.67 × aes128-gcm's 2 s.
        said = ssh.goals(ssh.LINKS[0], self.table(0.75, 3.0), 1)
        self.assertIn("(the faster plain row, ssh aes128-gcm): 2.67 [2.67–2.67] × — **met**",
                      said[0])
        said = ssh.goals(ssh.LINKS[0], self.table(1.0, 3.0), 1)
        self.assertIn("2.00 [2.00–2.00] × — **NOT met**", said[0])

    def test_on_veth_a_goal_above_what_tcp_alone_carries_is_said_not_reachable(self) -> None:
        table = self.table(1.0, 3.0)
        said = ssh.goals(ssh.LINKS[0], table, 1)
        self.assertNotIn("not reachable", said[0])  # no TCP row: nothing to say
        table[ssh.TCP] = runs({0: 1.25, 1: 1.25, 2: 1.25})  # 1.6 × aes128-gcm's 2 s
        said = ssh.goals(ssh.LINKS[0], table, 1)
        self.assertIn("**NOT met**; not reachable here: TCP alone (no cipher, one flow, both "
                      "ends on the same CPUs) is 1.60 [1.60–1.60] × ssh", said[0])
        table[ssh.TCP] = runs({0: 0.5, 1: 0.5, 2: 0.5})  # 4 ×: the goal is the transport's
        self.assertNotIn("not reachable", ssh.goals(ssh.LINKS[0], table, 1)[0])

    def test_the_fallback_is_held_to_the_default_cipher_that_carries_it(self) -> None:
        said = ssh.goals(ssh.LINKS[0], self.table(1.0, 3.0), 1)
        self.assertIn("no slower than plain ssh", said[1])
        self.assertIn("1.00 [1.00–1.00] × — **met**", said[1])
        said = ssh.goals(ssh.LINKS[0], self.table(1.0, 3.3), 1)
        self.assertIn("**NOT met**", said[1])

    def test_no_slower_goes_by_the_median_within_two_percent(self) -> None:
        self.assertEqual(ssh.no_slower([0.98, 0.99, 1.0]), "**met**")
        self.assertTrue(ssh.no_slower([0.97, 0.99, 1.01]).startswith("**met** (some"))
        self.assertTrue(ssh.no_slower([0.95, 0.97, 1.01]).startswith("**NOT met** (some"))

    def test_the_busiest_stage_s_cpu_is_each_round_s_largest(self) -> None:
        cpu = {0: {"here": 0.2, "ssh": 0.9, "sshd": 0.5}, 1: {"here": 1.1, "ssh": 0.8}, 2: {}}
        self.assertEqual(ssh.busiest(cpu), {0: 0.9, 1: 1.1})

    def test_on_veth_the_fallback_is_judged_on_hosts_of_their_own_when_cpu_was_counted(self):
        table = self.table(1.0, 6.0)  # half ssh's steady rate on these shared CPUs
        for row, top in ((ssh.SSH, 1.0), (ssh.THROUGH, 1.01)):
            table[row].cpu = {r: {"here": 0.3, "ssh": top, "sshd": 0.5} for r in range(3)}
        said = ssh.goals(ssh.LINKS[0], table, 1)[1]
        self.assertIn("on hosts of their own (the stream over the busiest stage's CPU, same "
                      "round): 0.99 [0.99–0.99] × — **met**; the steady rate on these shared "
                      "CPUs: 0.50 [0.50–0.50] ×", said)
        # On the line, where the CPU is not the limit, the steady rate decides.
        said = ssh.goals(ssh.LINKS[1], table, 1)[1]
        self.assertIn("0.50 [0.50–0.50] × — **NOT met**", said)
        self.assertNotIn("hosts of their own", said)

    def test_on_the_line_direct_is_held_to_the_line_rate(self) -> None:
        line = ssh.LINKS[1]
        nbytes = int(line.line_bits / 8 * 20)  # 10 s for its second half at the line rate
        said = ssh.goals(line, self.table(10.5, 3.0), nbytes)
        self.assertIn("of the line rate (1 Gbit/s): 0.95 [0.95–0.95] — **met**", said[0])
        said = ssh.goals(line, self.table(12.5, 3.0), nbytes)
        self.assertIn("0.80 [0.80–0.80] — **NOT met**", said[0])

    def test_the_first_byte_may_come_150_ms_after_ssh_s(self) -> None:
        said = ssh.goals(ssh.LINKS[0], self.table(1.0, 3.0), 1)
        self.assertEqual(len([g for g in said if "first byte" in g]), 2)
        for g in said[2:]:
            self.assertIn("100 [100–100] ms after ssh's — **met**", g)
        table = self.table(1.0, 3.0)
        table[ssh.DIRECT].first = {0: 0.7, 1: 0.7, 2: 0.7}
        self.assertIn("200 [200–200] ms after ssh's — **NOT met**",
                      ssh.goals(ssh.LINKS[0], table, 1)[2])

    def test_a_row_whose_data_took_another_path_has_its_goals_marked_not_valid(self) -> None:
        table = self.table(1.0, 1.0)
        table[ssh.THROUGH].wrong_path = ["256 MiB went beside ssh, not through it"]
        said = ssh.goals(ssh.LINKS[0], table, 1)
        self.assertIn("× — **met** — **not valid**", said[1])
        self.assertIn("**not valid**", said[3])
        self.assertNotIn("not valid", said[0] + said[2])

    def test_the_path_check_wants_nothing_beside_ssh_through_it_and_the_stream_direct(self):
        n = 256 * ssh.MIB
        self.assertIsNone(ssh.path_check(ssh.THROUGH, 20_000, n))  # a refused dial, say
        self.assertEqual(ssh.path_check(ssh.THROUGH, n + n // 50, n),
                         "261 MiB went beside ssh, not through it")
        self.assertIsNone(ssh.path_check(ssh.DIRECT, n + n // 50, n))  # with headers
        self.assertEqual(ssh.path_check(ssh.DIRECT, n // 2, n),
                         "only 128 MiB went beside ssh: the rest went through it")
        self.assertIsNone(ssh.path_check(ssh.SSH, n, n))

    def test_skipped_accel_rows_leave_their_goals_not_measured(self) -> None:
        said = ssh.goals(ssh.LINKS[0], self.table(1.0, 3.0, skipped="no ssh://"), 1)
        self.assertEqual(len(said), 4)
        for g in said:
            self.assertTrue(g.endswith(": not measured (the row was skipped: see its status)"), g)


class RowsTest(unittest.TestCase):
    def test_the_rows_command_lines(self) -> None:
        lab = SshLab.__new__(SshLab)  # the client argv only: no keys made
        lab.ssh_config = Path("/lab/ssh_config")
        far = "python3 reader.py 100 --stamps /w/f"
        got = {r.name: r.stages for r in ssh.rows(lab, "10.0.0.2", "/bin/accel", far)}
        client = ["ssh", "-F", "/lab/ssh_config"]
        self.assertEqual(got[ssh.SSH], [client + ["10.0.0.2", far]])
        self.assertEqual(got[ssh.AES],
                         [client + ["-c", "aes128-gcm@openssh.com", "10.0.0.2", far]])
        self.assertEqual(got[ssh.MBUFFER][1][-1], f"mbuffer -q -m 32M | {far}")
        for name, via in ((ssh.DIRECT, "direct"), (ssh.THROUGH, "ssh")):
            argv = got[name][0]
            self.assertEqual(argv[:3], ["/bin/accel", "--to", "ssh://10.0.0.2"])
            self.assertEqual(argv[argv.index("--via") + 1], via)
            self.assertEqual(argv[argv.index("--ssh-command") + 1], "ssh -F /lab/ssh_config")
            self.assertEqual(argv[argv.index("--remote-accel") + 1], "/bin/accel")
            # The transport measured as such: zeros would shrink a thousandfold under auto.
            self.assertEqual(argv[argv.index("--compress") + 1], "none")
            self.assertEqual(argv[-2:], ["--", far])
        tcp = next(r for r in ssh.rows(lab, "10.0.0.2", "/bin/accel", far) if r.name == ssh.TCP)
        self.assertEqual(tcp.stages[0][-2:], ["-O", f"10.0.0.2:{ssh.TCP_PORT}"])
        self.assertEqual(tcp.listener, f"mbuffer -q -m 32M -I {ssh.TCP_PORT} | {far}")
        shown = ssh.shown(got[ssh.DIRECT][0], "/bin/accel", far)
        self.assertEqual(shown, "accel --to ssh://10.0.0.2 --ssh-command 'ssh -F /lab/ssh_config'"
                                f" --remote-accel accel --via direct --compress none -- FAR")

    def test_with_roles_each_stage_starts_in_its_cgroup_and_is_shown_as_without(self):
        lab = SshLab.__new__(SshLab)
        lab.ssh_config = Path("/lab/ssh_config")
        far = "python3 reader.py 100 --stamps /w/f"
        roles = ssh.Roles("/bin/accel")
        plain = {r.name: r for r in ssh.rows(lab, "10.0.0.2", "/bin/accel", far)}
        wrapped = {r.name: r for r in ssh.rows(lab, "10.0.0.2", "/bin/accel", far, roles)}
        script = str(roles.script)
        self.assertEqual(wrapped[ssh.SSH].stages[0][:3], [script, "ssh", "ssh"])
        self.assertEqual(wrapped[ssh.SSH].stages[0][-1], f"{script} FAR {far}")
        self.assertEqual(wrapped[ssh.MBUFFER].stages[0][:2], [script, "here"])
        self.assertEqual(wrapped[ssh.MBUFFER].stages[1][-1],
                         f"{script} there mbuffer -q -m 32M | {script} FAR {far}")
        argv = wrapped[ssh.THROUGH].stages[0]
        self.assertEqual(argv[:3], [script, "here", "/bin/accel"])
        self.assertEqual(argv[argv.index("--ssh-command") + 1],
                         f"{script} ssh ssh -F /lab/ssh_config")
        self.assertEqual(argv[argv.index("--remote-accel") + 1], str(roles.far_accel))
        self.assertTrue(wrapped[ssh.TCP].listener.startswith(f"{script} there mbuffer"))
        for name, row in plain.items():
            for stage, same in zip(row.stages, wrapped[name].stages):
                self.assertEqual(ssh.shown(same, "/bin/accel", far),
                                 ssh.shown(stage, "/bin/accel", far))
            if row.listener:
                self.assertEqual(ssh.shown(["sh", "-c", wrapped[name].listener], "/bin/accel",
                                           far),
                                 ssh.shown(["sh", "-c", row.listener], "/bin/accel", far))

    def test_known_hosts_names_a_port_other_than_22_as_ssh_looks_it_up(self) -> None:
        self.assertEqual(known_hosts_line(["10.0.0.2", "10.0.1.2"], "ssh-ed25519", "AAAA"),
                         "10.0.0.2,10.0.1.2 ssh-ed25519 AAAA\n")
        self.assertEqual(known_hosts_line(["10.0.0.2"], "ssh-ed25519", "AAAA", 2222),
                         "[10.0.0.2]:2222 ssh-ed25519 AAAA\n")


LAB = os.geteuid() == 0 and shutil.which("ip") and shutil.which("ssh") \
    and Path("/usr/sbin/sshd").exists()


@unittest.skipUnless(LAB, "needs root, ip and openssh-server")
class LabTest(unittest.TestCase):
    def test_the_lab_sshd_is_reached_with_host_key_checking_on(self) -> None:
        with Netns("sshlab-a") as a, Netns("sshlab-b") as b, \
                tempfile.TemporaryDirectory() as d:
            veth(a, b, "10.213.7.1", "10.213.7.2")
            lab = SshLab(["10.213.7.2"], Path(d))
            with Sshd(b, lab.sshd_config):
                there = subprocess.run(
                    a.argv(lab.ssh + ["10.213.7.2", "echo shell level $SHLVL; ip -o -4 addr show"]),
                    capture_output=True, text=True, timeout=60)
                # The same sshd at an address its known_hosts does not list is refused:
                # checking is on, not turned off.
                unknown = subprocess.run(b.argv(lab.ssh + ["127.0.0.1", "true"]),
                                         capture_output=True, text=True, timeout=60)
        self.assertEqual(there.returncode, 0, there.stderr)
        self.assertIn("inet 10.213.7.2/", there.stdout)  # it ran in the far namespace
        # The session's shell was given SHLVL=1 (and counted itself): not a top-level shell,
        # so bash read no ~/.bashrc for it.
        self.assertTrue(there.stdout.startswith("shell level 2\n"), there.stdout)
        self.assertEqual(unknown.returncode, 255)
        self.assertIn("Host key verification failed", unknown.stderr)

    @unittest.skipUnless(shutil.which("nft") and shutil.which("mbuffer"), "needs nft, mbuffer")
    def test_bytes_beside_ssh_counts_tcp_to_other_ports_only(self) -> None:
        with Netns("beside-a") as a, Netns("beside-b") as b, \
                tempfile.TemporaryDirectory() as d:
            veth(a, b, "10.213.7.1", "10.213.7.2")
            lab = SshLab(["10.213.7.2"], Path(d))
            beside = BytesBeside(a, 22)
            with Sshd(b, lab.sshd_config):
                through = subprocess.run(a.argv(lab.ssh + ["10.213.7.2", "cat > /dev/null"]),
                                         input=bytes(4 << 20), capture_output=True, timeout=60)
                after_ssh = beside.read()
            other = subprocess.Popen(b.argv(["mbuffer", "-q", "-I", "9501", "-o", "/dev/null"]),
                                     stderr=subprocess.DEVNULL)
            try:
                self.assertTrue(b.listening(9501))
                subprocess.run(a.argv(["mbuffer", "-q", "-O", "10.213.7.2:9501"]),
                               input=bytes(4 << 20), check=True, capture_output=True, timeout=60)
                self.assertEqual(other.wait(30), 0)
            finally:
                other.kill()
                other.wait()
            after_other = beside.read()
        self.assertEqual(through.returncode, 0, through.stderr)
        self.assertEqual(after_ssh, 0)
        self.assertGreaterEqual(after_other, 4 << 20)

    def test_roles_count_each_stage_s_cpu_in_a_namespace_exited_children_included(self):
        with tempfile.TemporaryDirectory() as d, Netns("sshlab-roles") as ns:
            with ssh.Roles("/bin/true", Path(d)) as roles:
                if roles is None:
                    self.skipTest("no cgroup2 here")
                before = roles.usage()
                burn = "python3 -c 'sum(range(3_000_000))'"  # a child, which exits first
                subprocess.run(ns.argv([str(roles.script), "FAR", "sh", "-c", burn]), check=True)
                subprocess.run(ns.argv([str(roles.far_accel)]), check=True)  # /bin/true
                spent = {k: v - before[k] for k, v in roles.usage().items()}
            self.assertFalse(Path(d, "ssh-cgroup").exists())  # taken down
        self.assertGreater(spent["FAR"], 0.05)
        self.assertLess(spent["there"], spent["FAR"])
        self.assertEqual(spent["ssh"] + spent["sshd"] + spent["here"], 0)

    def test_a_namespace_takes_what_is_left_in_it_with_it(self) -> None:
        with Netns("sshlab-left") as ns:
            left = subprocess.Popen(ns.argv(["sleep", "600"]))
            deadline = time.monotonic() + 30
            while left.pid not in ns.pids() and time.monotonic() < deadline:
                pass  # `ip netns exec` enters the namespace, then becomes sleep
            self.assertIn(left.pid, ns.pids())
        try:
            self.assertEqual(left.wait(10), -9)
        finally:
            left.kill()
            left.wait()


if __name__ == "__main__":
    unittest.main()
