"""The compress measure's pure parts: each link's run holds a real mix.
Run: python3 -m unittest discover -s bench/tests"""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelbench.measures.compress import LINKS, PIECE  # noqa: E402
from accelbench.context import MIB  # noqa: E402


class LinksTest(unittest.TestCase):
    def test_every_run_holds_text_and_random_pieces_of_the_mix(self) -> None:
        # The mix is the corpus and random bytes in turn, PIECE each: a run shorter than two
        # pieces sends the corpus alone, and its "mix" row measures nothing the corpus's
        # does not.
        for name, _, mib, _ in LINKS:
            with self.subTest(link=name):
                self.assertGreaterEqual(mib * MIB, 2 * PIECE)


if __name__ == "__main__":
    unittest.main()
