#!/usr/bin/env python3
"""Writes the summary table at the top of docs/benchmarks.md (between its
"bench:summary" markers) from the figures the notebook below it marks, so the
summary cannot lag the tables: tools/test.sh runs `tools/bench-summary.py
--check`, which fails when the block differs from what this script writes.

usage: tools/bench-summary.py [--doc FILE] [--check]

A figure is marked by a one-line HTML comment above the table that holds it
(any distance above, in the same "##" section; the first table after the
comment that has the named row and column is used):

  <!-- bench:figure kind="relay" what="relay: ring -> embedded broker vs TCP-fed broker"
       date="2026-11-30 14:26" load="4-12" figure="ring -> ringcast-relay @ vs broker"
       peer="TCP-fed broker = TCP publisher -> ringcast-broker @ delivered msgs/s" -->

(on one line in the file). Keys:
  kind    one summary row per kind: the marker with the latest date wins (on a
          tie, the one further down the file); rows keep the order in which
          their kinds first appear in the file.
  what    the row's first column.
  date    UTC, "YYYY-MM-DD" or "YYYY-MM-DD HH:MM" (compared as text).
  load    optional: the load average during the run, as recorded.
  figure  repeatable: "[LABEL = ]ROW @ COLUMN". ROW is the row's leading cells,
          separated by " ; " (e.g. "ringcast ; batch ; 1"), COLUMN a header
          cell, "COLUMN #2" its second occurrence in the header; both are
          compared without "**" and surrounding spaces. The cell is copied as
          written (bold kept), after LABEL if one is given.
  peer    repeatable, same form: the peer's figures from the same run.
A table without a marker is not summarised.
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- bench:summary:begin -->", "<!-- bench:summary:end -->"
MARKER = re.compile(r"^<!--\s*bench:figure\s+(.*?)\s*-->\s*$")
PAIR = re.compile(r'(\w+)="([^"]*)"')
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
DATE = re.compile(r"^\d{4}-\d\d-\d\d( \d\d:\d\d)?$")


class Fail(Exception):
    pass


def cells(line: str) -> list:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return [c.strip() for c in body.split("|")]


def is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"\|?(\s*:?-+:?\s*\|)*\s*:?-+:?\s*\|?", line.strip()))


def tables(lines: list, start: int, stop: int):
    """(header cells, body rows) of each table in lines[start:stop]."""
    i = start
    while i < stop - 1:
        if lines[i].lstrip().startswith("|") and is_rule(lines[i + 1]):
            header = cells(lines[i])
            rows = []
            i += 2
            while i < stop and lines[i].lstrip().startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            yield header, rows
        else:
            i += 1


def plain(cell: str) -> str:
    """A cell as compared: without bold markers and surrounding spaces."""
    return cell.replace("**", "").strip()


def slug(text: str, seen: dict) -> str:
    """GitHub's anchor for a heading (duplicates get -1, -2, ...)."""
    s = re.sub(r"[^\w\- ]", "", text.strip().lower().replace("`", "")).replace(" ", "-")
    n = seen.get(s, 0)
    seen[s] = n + 1
    return s if n == 0 else f"{s}-{n}"


def resolve(ref: str, lines: list, start: int, stop: int, where: str) -> str:
    label, _, spec = ref.rpartition(" = ")
    row_spec, sep, column = spec.rpartition(" @ ")
    if not sep:
        raise Fail(f"{where}: '{ref}' is not '[LABEL = ]ROW @ COLUMN'")
    row_key = [plain(c) for c in row_spec.split(" ; ")]
    column, _, nth = column.partition(" #")
    column = plain(column)
    if nth and not nth.isdigit():
        raise Fail(f"{where}: '{ref}': the column's ' #N' needs a number")
    occurrence = int(nth) if nth else 1
    for header, rows in tables(lines, start, stop):
        cols = [j for j, h in enumerate(header) if plain(h) == column]
        if len(cols) < occurrence:
            continue
        col = cols[occurrence - 1]
        for row in rows:
            if [plain(c) for c in row[: len(row_key)]] == row_key and col < len(row):
                return f"{label.strip()} {row[col]}" if label else row[col]
    raise Fail(f"{where}: no table below the marker, in its section, has row '{row_spec}' and column '{column}'")


def summary(text: str, name: str) -> str:
    lines = text.split("\n")
    # Headings outside code blocks: (line, level, text).
    headings = []
    code = set()  # lines inside fenced code blocks (examples are not markers)
    in_code = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code:
            code.add(i)
        elif m := HEADING.match(line):
            headings.append((i, len(m.group(1)), m.group(2)))
    seen_slugs: dict = {}
    anchors = {i: (t, slug(t, seen_slugs)) for i, _, t in headings}
    latest: dict = {}
    order: list = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m or i in code:
            continue
        above = [h for h in headings if h[0] < i]
        heading = anchors[above[-1][0]] if above else ("", "")
        # The table search stops at the next "#" or "##" heading.
        stop = next((h[0] for h in headings if h[0] > i and h[1] <= 2), len(lines))
        where = f"{name}:{i + 1}"
        keys: dict = {}
        for k, v in PAIR.findall(m.group(1)):
            keys.setdefault(k, []).append(v)
        for k in ("kind", "what", "date", "figure"):
            if k not in keys:
                raise Fail(f"{where}: bench:figure without {k}=")
        for k in keys:
            if k not in ("kind", "what", "date", "load", "figure", "peer"):
                raise Fail(f"{where}: unknown key {k}=")
        date = keys["date"][0]
        if not DATE.match(date):
            raise Fail(f"{where}: date '{date}' is not YYYY-MM-DD[ HH:MM]")
        entry = {
            "what": keys["what"][0],
            "date": date,
            "load": keys.get("load", [""])[0],
            "figure": "; ".join(resolve(r, lines, i + 1, stop, where) for r in keys["figure"]),
            "peer": "; ".join(resolve(r, lines, i + 1, stop, where) for r in keys.get("peer", [])) or "-",
            "from": heading,
        }
        kind = keys["kind"][0]
        if kind not in latest:
            order.append(kind)
        if kind not in latest or date >= latest[kind]["date"]:
            latest[kind] = entry
    out = [BEGIN,
           "<!-- Generated by tools/bench-summary.py from the bench:figure markers below: edit the",
           "     notebook and its markers, then run tools/bench-summary.py; tools/test.sh fails while",
           "     this block is stale. -->",
           "",
           "| what | latest figure | peer, same run | run (UTC), load | notebook |",
           "|---|---|---|---|---|"]
    for kind in order:
        e = latest[kind]
        when = e["date"] + (f", load {e['load']}" if e["load"] else "")
        title, anchor = e["from"]
        out.append(f"| {e['what']} | {e['figure']} | {e['peer']} | {when} | [{title}](#{anchor}) |")
    out.append(END)
    return "\n".join(out)


def rewrite(text: str, name: str) -> str:
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise Fail(f"{name} needs one '{BEGIN}' line and one '{END}' line after it")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + summary(text, name) + tail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"), help="the notebook to summarise")
    ap.add_argument("--check", action="store_true", help="fail if the summary is stale instead of writing it")
    args = ap.parse_args()
    path = Path(args.doc)
    text = path.read_text()
    try:
        new = rewrite(text, args.doc)
    except Fail as e:
        sys.exit(f"bench-summary: {e}")
    if args.check:
        if new != text:
            sys.exit(f"bench-summary: the summary in {args.doc} is stale; run tools/bench-summary.py")
    elif new != text:
        path.write_text(new)


if __name__ == "__main__":
    main()
