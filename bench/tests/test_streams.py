"""The streams measure's pure parts: the cells (BBR's skipped where the kernel lacks it), the
per-flow cap's tc lines, same-round ratios, accel's best row, and the goals' verdicts.
Run: python3 -m unittest discover -s bench/tests"""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelbench.measures import streams  # noqa: E402
from accelbench.measures.streams import MBUFFER, SSH, accel_name  # noqa: E402


def cell(name: str, walls: dict, congestion: str | None = None) -> streams.Cell:
    c = streams.Cell(name, "h", "about", 1, 1, congestion)
    c.walls = walls
    return c


class CellsTest(unittest.TestCase):
    def test_bbr_runs_where_offered_and_is_skipped_saying_why_where_not(self) -> None:
        with_bbr = {c.name: c.skipped for c in streams.cells("reno bbr cubic\n")}
        self.assertTrue(all(why is None for why in with_bbr.values()))
        without = {c.name: c.skipped for c in streams.cells("reno cubic\n")}
        self.assertIn("no BBR", without["(b) lossy, BBR"])
        self.assertIn("reno cubic", without["(b) lossy, BBR"])
        self.assertEqual([n for n, why in without.items() if why], ["(b) lossy, BBR"])


class HtbTest(unittest.TestCase):
    def test_a_class_and_a_bucket_per_hash_value_and_the_hash_on_source_port_bits(self) -> None:
        lines = streams.htb_batch("dev0", bits=4).splitlines()
        leaves = [ln for ln in lines if "classid 1:1" in ln and "ceil 50mbit" in ln]
        self.assertEqual(len(leaves), 16)
        buckets = [ln for ln in lines if " ht 2:" in ln]
        self.assertEqual(len(buckets), 16)
        self.assertIn("ht 2:f: match u8 0 0 flowid 1:10f", buckets[-1])
        hashing = lines[-1]
        # Bits 1..4 of the source port: the high half of the word at offset 20, bit 0 left out.
        self.assertIn("hashkey mask 0x001e0000 at 20 link 2:", hashing)
        self.assertIn("divisor 16", "\n".join(lines))

    def test_the_default_is_256_classes(self) -> None:
        text = streams.htb_batch("d")
        self.assertIn("divisor 256", text)
        self.assertIn("mask 0x01fe0000", text)
        self.assertIn("flowid 1:1ff", text)


class RatiosTest(unittest.TestCase):
    def test_ratios_pair_the_same_rounds_only(self) -> None:
        walls = {"x": {0: 2.0, 1: 4.0, 2: 1.0}, "base": {0: 4.0, 2: 3.0}}
        self.assertEqual(streams.ratios(walls, "x", "base"), [2.0, 3.0])
        self.assertEqual(streams.ratios(walls, "x", "missing"), [])

    def test_the_best_accel_row_has_the_lowest_median_wall(self) -> None:
        walls = {accel_name(1): {0: 9.0}, accel_name(2): {0: 3.0, 1: 8.0, 2: 7.0},
                 accel_name(4): {0: 5.0, 1: 5.0, 2: 5.0}, accel_name(8): {}, MBUFFER: {0: 1.0}}
        self.assertEqual(streams.best_accel(walls), accel_name(4))
        self.assertIsNone(streams.best_accel({MBUFFER: {0: 1.0}}))


class GoalsTest(unittest.TestCase):
    def test_the_cap_goal_is_met_at_3_5_and_not_below(self) -> None:
        met = streams.goals(cell("(a) per-flow cap",
                                 {accel_name(1): {0: 7.0}, accel_name(4): {0: 2.0}}))
        self.assertEqual(len(met), 1)
        self.assertIn("3.50", met[0])
        self.assertIn("**met**", met[0])
        short = streams.goals(cell("(a) per-flow cap",
                                   {accel_name(1): {0: 6.9}, accel_name(4): {0: 2.0}}))
        self.assertIn("**NOT met**", short[0])

    def test_lossy_cubic_compares_n8_and_accels_best_with_mbuffer_and_ssh(self) -> None:
        walls = {accel_name(1): {0: 30.0}, accel_name(2): {0: 20.0}, accel_name(4): {0: 12.0},
                 accel_name(8): {0: 10.0}, MBUFFER: {0: 30.0}, SSH: {0: 20.0}}
        lines = streams.goals(cell("(b) lossy, CUBIC", walls, "cubic"))
        self.assertEqual(len(lines), 3)
        self.assertIn("**met**", lines[0])  # 30 / 10
        self.assertIn(f"({accel_name(8)})", lines[1])
        self.assertIn("**met**", lines[1])  # 30 / 10 against mbuffer
        self.assertIn("**NOT met**", lines[2])  # 20 / 10 against ssh

    def test_a_row_without_figures_is_not_measured(self) -> None:
        lines = streams.goals(cell("(b) lossy, CUBIC", {accel_name(1): {0: 3.0}}, "cubic"))
        self.assertTrue(all("not measured" in ln for ln in lines))

    def test_unlimited_allows_n2_five_percent_slower_and_no_more(self) -> None:
        ok = streams.goals(cell("(c) unlimited veth",
                                {accel_name(1): {0: 1.0}, accel_name(2): {0: 1.05}}))
        self.assertIn("**met**", ok[0])
        slow = streams.goals(cell("(c) unlimited veth",
                                  {accel_name(1): {0: 1.0}, accel_name(2): {0: 1.06}}))
        self.assertIn("**NOT met**", slow[0])


if __name__ == "__main__":
    unittest.main()
