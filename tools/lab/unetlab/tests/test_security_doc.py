"""docs/security.md's advisory table: every row names a test, and every test it names exists.

A row names GoogleTest tests as `Fixture.Name` (or `Fixture.*` for a whole fixture), found as
TEST(Fixture, Name), TEST_F(...) or TEST_P(...) in a source under tests/, or a file by its
path from the repository's root (a fuzz target). A test renamed or removed without the table
following fails here.
"""
import os
import re
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
DOC = os.path.join(ROOT, "docs", "security.md")
TESTS = os.path.join(ROOT, "tests")
SECTION = "## Advisories and hardening rules"


def table_rows(text):
    """The advisory table's rows under SECTION, each a list of cells; header and rule left out."""
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    lines = text[start:end if end >= 0 else len(text)].splitlines()
    table = [ln for ln in lines if ln.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in table[2:]]
    return header, rows


def names_in(cell):
    return re.findall(r"`([^`]+)`", cell)


def test_sources():
    out = []
    for d, _, files in os.walk(TESTS):
        for f in files:
            if f.endswith((".cpp", ".hpp", ".cc", ".h")):
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    out.append(fh.read())
    return "\n".join(out)


def exists(name, sources):
    if "/" in name:
        return os.path.isfile(os.path.join(ROOT, name))
    fixture, sep, test = name.partition(".")
    if not sep or not fixture or not test:
        return False
    pattern = r"\bTEST(?:_F|_P)?\(\s*" + re.escape(fixture) + r"\s*,"
    if test != "*":
        pattern += r"\s*" + re.escape(test) + r"\s*\)"
    return re.search(pattern, sources) is not None


class SecurityDocTest(unittest.TestCase):
    def test_every_row_names_a_test_that_exists(self):
        with open(DOC, encoding="utf-8") as f:
            header, rows = table_rows(f.read())
        self.assertIn("Test", header)
        col = header.index("Test")
        self.assertGreater(len(rows), 40, "the advisory table was not found whole")
        sources = test_sources()
        for row in rows:
            self.assertEqual(len(row), len(header), f"row with {len(row)} cells: {row[0]}")
            names = names_in(row[col])
            self.assertTrue(names, f"row names no test: {row[0]}")
            for name in names:
                self.assertTrue(exists(name, sources),
                                f"{name} (row: {row[0]}) is not a test under tests/ or a file")

    def test_a_name_that_is_not_a_test_is_found_missing(self):
        sources = "TEST_F(HostileFrontend, Xsa39_Real) {}\nTEST(Credit, Refills) {}\n"
        self.assertTrue(exists("HostileFrontend.Xsa39_Real", sources))
        self.assertTrue(exists("Credit.*", sources))
        self.assertFalse(exists("HostileFrontend.Xsa39_Rea", sources))
        self.assertFalse(exists("Xsa39_Real", sources))
        self.assertFalse(exists("Missing.*", sources))
        self.assertTrue(exists("fuzz/ctrl_ring_fuzz.cpp", sources))
        self.assertFalse(exists("fuzz/no_such_fuzz.cpp", sources))


if __name__ == "__main__":
    unittest.main()
