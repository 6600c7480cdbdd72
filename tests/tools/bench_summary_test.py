"""tools/bench-summary.py on small notebooks: which marker wins per kind, how a
cell is found, and that --check fails on a stale summary or a missing cell."""
import importlib.util
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "bench-summary.py"
spec = importlib.util.spec_from_file_location("bench_summary", SCRIPT)
bench_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_summary)

HEAD = "# Benchmarks\n\n<!-- bench:summary:begin -->\n<!-- bench:summary:end -->\n"


def section(title, marker, table):
    return f"\n## {title}\n\nSome prose.\n\n{marker}\n\n{table}\n"


TABLE = ("| path | N | msgs/s | p99 | p99 |\n|---|---:|---:|---:|---:|\n"
         "| ours | 1 | **2.0 M** | 5 us | 50 us |\n| peer | 1 | 1.0 M | 7 us | 70 us |\n")


def marker(kind, date, fig="ours ; 1 @ msgs/s", what="w", extra=""):
    return f'<!-- bench:figure kind="{kind}" what="{what}" date="{date}" figure="{fig}"{extra} -->'


def rows(doc):
    out = bench_summary.rewrite(doc, "doc.md")
    block = out.split(bench_summary.BEGIN)[1].split(bench_summary.END)[0]
    return [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| what ")]


class BenchSummaryTest(unittest.TestCase):
    def test_the_latest_date_of_a_kind_wins_and_rows_keep_first_appearance_order(self):
        doc = (HEAD + section("Old run", marker("a", "2026-11-30 10:00", what="old"), TABLE)
               + section("Other", marker("b", "2026-11-30"), TABLE)
               + section("New run", marker("a", "2026-12-01 09:00", what="new"), TABLE.replace("2.0 M", "3.0 M")))
        got = rows(doc)
        self.assertEqual(len(got), 2)
        self.assertTrue(got[0].startswith("| new | **3.0 M** | - | 2026-12-01 09:00 | [New run](#new-run) |"), got[0])
        self.assertTrue(got[1].startswith("| w | **2.0 M** |"), got[1])

    def test_an_earlier_date_further_down_does_not_replace_a_later_one(self):
        doc = (HEAD + section("New", marker("a", "2026-12-01", what="new"), TABLE)
               + section("Old", marker("a", "2026-11-01", what="old"), TABLE))
        self.assertTrue(rows(doc)[0].startswith("| new |"))

    def test_labels_repeated_columns_bold_row_cells_peers_and_load(self):
        table = TABLE.replace("| ours |", "| **ours** |")
        extra = ' figure="p99 = ours ; 1 @ p99 #2" peer="them = peer ; 1 @ msgs/s" load="3-4"'
        got = rows(HEAD + section("S", marker("a", "2026-12-01", extra=extra), table))
        self.assertEqual(got, ["| w | **2.0 M**; p99 50 us | them 1.0 M | 2026-12-01, load 3-4 | [S](#s) |"])

    def test_a_marker_inside_a_code_block_is_an_example_not_a_figure(self):
        doc = HEAD + "\n```text\n" + marker("x", "2026-12-01") + "\n```\n" + section("S", marker("a", "2026-12-01"), TABLE)
        self.assertEqual(len(rows(doc)), 1)

    def test_the_search_stops_at_the_next_section(self):
        doc = HEAD + "\n## Empty\n\n" + marker("a", "2026-12-01") + "\n\n## Later\n\n" + TABLE
        with self.assertRaisesRegex(bench_summary.Fail, "doc.md:8: no table .* 'ours ; 1' and column 'msgs/s'"):
            rows(doc)

    def test_check_fails_on_a_stale_summary_and_passes_once_rewritten(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "b.md"
            path.write_text(HEAD + section("S", marker("a", "2026-12-01"), TABLE))
            check = [sys.executable, str(SCRIPT), "--doc", str(path), "--check"]
            stale = subprocess.run(check, capture_output=True, text=True)
            self.assertNotEqual(stale.returncode, 0)
            self.assertIn("stale", stale.stderr)
            subprocess.run([sys.executable, str(SCRIPT), "--doc", str(path)], check=True)
            self.assertEqual(subprocess.run(check).returncode, 0)
            path.write_text(path.read_text().replace("| ours | 1 | **2.0 M** |", "| ours | 1 | 2.5 M |"))  # the table, not the summary
            self.assertNotEqual(subprocess.run(check, capture_output=True).returncode, 0)


if __name__ == "__main__":
    unittest.main()
