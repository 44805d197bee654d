"""The compress measure's pure parts: each link's run holds a real mix.
Run: python3 -m unittest discover -s bench/tests"""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelbench.measures.compress import AUTO, LINKS, NONE, PIECE, schedule  # noqa: E402
from accelbench.measures.ssh import Row  # noqa: E402
from accelbench.stats import Samples  # noqa: E402
from accelbench.context import MIB  # noqa: E402


class LinksTest(unittest.TestCase):
    def test_every_run_holds_text_and_random_pieces_of_the_mix(self) -> None:
        # The mix is the corpus and random bytes in turn, PIECE each: a run shorter than two
        # pieces sends the corpus alone, and its "mix" row measures nothing the corpus's
        # does not.
        for name, _, mib, _ in LINKS:
            with self.subTest(link=name):
                self.assertGreaterEqual(mib * MIB, 2 * PIECE)


class ScheduleTest(unittest.TestCase):
    def test_none_and_auto_run_on_alone_after_every_rows_rounds(self) -> None:
        rows = [Row(name, []) for name in (NONE, AUTO, "zstd -1 | accel", "ssh -C")]
        cells = [(kind, row) for kind in ("corpus", "mix") for row in rows]
        samples = {(kind, row.name): Samples() for kind, row in cells}
        runs = list(schedule(cells, 3, 12, samples))
        rounds = {key: [r for r, (kind, row), _ in runs if (kind, row.name) == key]
                  for key in samples}
        for kind in ("corpus", "mix"):
            self.assertEqual(rounds[(kind, NONE)], list(range(12)))
            self.assertEqual(rounds[(kind, AUTO)], list(range(12)))
            self.assertEqual(rounds[(kind, "ssh -C")], [0, 1, 2])
        # Every row's rounds come first; the pair's extra ones after.
        self.assertEqual({r for r, _, _ in runs[:3 * len(cells)]}, {0, 1, 2})
        # No more than the rounds where the pair is not asked for more.
        self.assertEqual(len(list(schedule(cells, 3, 3, samples))), 3 * len(cells))


if __name__ == "__main__":
    unittest.main()
