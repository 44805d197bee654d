"""The results file: a run replaces the sections of the measures it ran and keeps the others;
--quick and --no-results write nothing. Run: python3 -m unittest discover -s bench/tests"""

import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelbench import cli, results  # noqa: E402

ORDER = ("seed", "throughput", "rss")


def report(title: str, figure: str) -> str:
    """A measure's report as a measure prints it: a `## ` heading, a paragraph, a table."""
    return f"## {title}\n\nWhat the columns are.\n\n| X | GiB/s |\n|---|---|\n| accel | {figure} |\n"


class RecordTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "RESULTS.md"

    def tearDown(self) -> None:
        self.dir.cleanup()

    def record(self, name: str, figure: str) -> None:
        text = results.section(name, ["- date: today", f"- command: `bench/run.py --only {name}`"],
                               report(f"{name} table", figure))
        results.record(self.path, name, text, ORDER)

    def test_a_run_replaces_its_section_and_keeps_the_others(self) -> None:
        self.record("throughput", "1.11")
        self.record("seed", "2.22")
        self.record("throughput", "3.33")
        sections = results.read_sections(self.path.read_text())
        self.assertEqual(list(sections), ["seed", "throughput"])  # in ORDER, not run order
        self.assertIn("| accel | 2.22 |", sections["seed"])
        self.assertIn("| accel | 3.33 |", sections["throughput"])
        self.assertNotIn("1.11", self.path.read_text())
        self.assertIn("Not yet measured here: rss.", self.path.read_text())

    def test_a_section_keeps_what_the_measure_printed_one_level_down(self) -> None:
        self.record("rss", "4.44")
        text = self.path.read_text()
        self.assertIn("\n## rss\n\n- date: today\n- command: `bench/run.py --only rss`\n\n"
                      "### rss table\n\nWhat the columns are.\n", text)
        self.assertIn("| accel | 4.44 |", text)

    def test_a_section_of_a_measure_no_longer_known_is_kept(self) -> None:
        self.record("seed", "5.55")
        results.record(self.path, "gone", results.section("gone", [], report("old", "6.66")),
                       ORDER)
        self.record("seed", "7.77")
        sections = results.read_sections(self.path.read_text())
        self.assertEqual(list(sections), ["seed", "gone"])
        self.assertIn("6.66", sections["gone"])


class WhenTest(unittest.TestCase):
    def test_quick_and_no_results_write_nothing(self) -> None:
        ap = cli.parser()
        self.assertEqual(cli.results_file(ap.parse_args([])), cli.RESULTS)
        self.assertEqual(cli.results_file(ap.parse_args(["--results", "x.md"])), Path("x.md"))
        self.assertIsNone(cli.results_file(ap.parse_args(["--quick"])))
        self.assertIsNone(cli.results_file(ap.parse_args(["--quick", "--results", "x.md"])))
        self.assertIsNone(cli.results_file(ap.parse_args(["--no-results"])))
        self.assertIsNone(cli.results_file(ap.parse_args(["--streams-cells", "c"])))


if __name__ == "__main__":
    unittest.main()
