#!/usr/bin/env python3
"""Writes the generated tables of docs/benchmarks.md (between its
"bench:summary" markers) from the figures the notebook in docs/bench-history/
marks, so the page of current figures cannot lag the notebook: tools/test.sh
runs `tools/bench-summary.py --check`, which fails when a block differs from
what this script writes.

usage: tools/bench-summary.py [--doc FILE] [--history DIR] [--check]

(A --doc other than docs/benchmarks.md is read without a notebook directory
unless --history names one: its own markers fill its blocks, and a plain
"<!-- bench:summary:begin -->" block shows every kind in a shorter table.)

The page holds one or more blocks, each naming the kinds of figure it shows,
in the order given:

  <!-- bench:summary:begin kinds="ring-saturation-n1 ring-latency-n1" -->
  ... (generated) ...
  <!-- bench:summary:end -->

Every kind marked in the notebook must be named by exactly one block, and a
block may name only marked kinds, so a new kind of figure has to be placed in
the section of the page that answers its question.

A figure is marked in a notebook file (every docs/bench-history/*.md) by a
one-line HTML comment above the table that holds it (any distance above, in
the same "##" section; the first table after the comment that has the named
row and column is used):

  <!-- bench:figure kind="relay" what="relay: ring -> embedded broker vs TCP-fed broker"
       date="2026-11-30 14:26" load="4-12" commit="dff0cff"
       cmd="build/release/bench/relay/ringcast-relay-bench --subscribers 10"
       figure="ring -> ringcast-relay @ vs broker"
       peer="TCP-fed broker = TCP publisher -> ringcast-broker @ delivered msgs/s" -->

(on one line in the file). Keys:
  kind    one row per kind: the marker with the latest date wins (on a tie,
          the one further down; files are read in name order).
  what    the row's first column.
  date    UTC, "YYYY-MM-DD" or "YYYY-MM-DD HH:MM" (compared as text).
  load    optional: the load average during the run, as recorded.
  commit  optional: the commit the run measured.
  cmd     the command that produced the figure; required on the marker that
          wins its kind (older markers may lack it). No double quotes.
  figure  repeatable: "[LABEL = ]ROW @ COLUMN". ROW is the row's leading cells,
          separated by " ; " (e.g. "ringcast ; batch ; 1"), COLUMN a header
          cell, "COLUMN #2" its second occurrence in the header; both are
          compared without "**" and surrounding spaces. The cell is copied as
          written (bold kept), after LABEL if one is given.
  peer    repeatable, same form: the peer's figures from the same run.
A table without a marker is not summarised. The page says what is, so a
generated block that would cite an issue number ("#12", "issue 12") fails.
"""
import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A block naming its kinds (the page's sections), or the plain form: every
# kind, in the order of first appearance, in the shorter format of a single
# summary table (a notebook that summarises itself).
BEGIN = "<!-- bench:summary:begin -->"
BEGIN_KINDS = re.compile(r'^<!--\s*bench:summary:begin\s+kinds="([^"]*)"\s*-->\s*$')
END = "<!-- bench:summary:end -->"
ISSUE = re.compile(r"#[0-9]+|[Ii]ssues? [0-9]+")
KEYS = ("kind", "what", "date", "load", "commit", "cmd", "figure", "peer")
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


def markers(text: str, name: str, link: str, latest: dict) -> None:
    """Reads the bench:figure markers of one notebook file into latest (kind -> entry)."""
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
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m or i in code:
            continue
        above = [h for h in headings if h[0] < i]
        title, anchor = anchors[above[-1][0]] if above else ("", "")
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
            if k not in KEYS:
                raise Fail(f"{where}: unknown key {k}=")
        date = keys["date"][0]
        if not DATE.match(date):
            raise Fail(f"{where}: date '{date}' is not YYYY-MM-DD[ HH:MM]")
        # What the page shows of the heading: without "(issue N ...)".
        shown = re.sub(r"\s*\((?:issues? |#)[0-9][^)]*\)", "", title).strip()
        entry = {
            "what": keys["what"][0],
            "date": date,
            "load": keys.get("load", [""])[0],
            "commit": keys.get("commit", [""])[0],
            "cmd": keys.get("cmd", [""])[0],
            "figure": "; ".join(resolve(r, lines, i + 1, stop, where) for r in keys["figure"]),
            "peer": "; ".join(resolve(r, lines, i + 1, stop, where) for r in keys.get("peer", [])) or "-",
            "from": (shown, f"{link}#{anchor}"),
            "where": where,
        }
        kind = keys["kind"][0]
        if kind not in latest or date >= latest[kind]["date"]:
            latest[kind] = entry


def block(kinds: list, latest: dict, history: str, full: bool) -> list:
    source = f"the bench:figure markers in {history}" if history else "the bench:figure markers below"
    out = [f"<!-- Generated by tools/bench-summary.py from {source}: edit",
           "     the notebook and its markers, then run tools/bench-summary.py; tools/test.sh fails while",
           "     this block is stale. -->",
           ""]
    if full:
        out += ["| what | ringcast | peer, same run | run (UTC), load, commit | command | notebook |",
                "|---|---|---|---|---|---|"]
    else:
        out += ["| what | latest figure | peer, same run | run (UTC), load | notebook |",
                "|---|---|---|---|---|"]
    for kind in kinds:
        e = latest[kind]
        title, href = e["from"]
        if not full:
            when = e["date"] + (f", load {e['load']}" if e["load"] else "")
            out.append(f"| {e['what']} | {e['figure']} | {e['peer']} | {when} | [{title}]({href}) |")
            continue
        if not e["cmd"]:
            raise Fail(f"{e['where']}: the latest marker of kind '{kind}' needs cmd=")
        when = e["date"] + (f", load {e['load']}" if e["load"] else "") + (f", `{e['commit']}`" if e["commit"] else "")
        cmd = "`" + e["cmd"].replace("|", "\\|") + "`"
        out.append(f"| {e['what']} | {e['figure']} | {e['peer']} | {when} | {cmd} | [{title}]({href}) |")
    return out


def rewrite(text: str, name: str, latest: dict | None = None, history: str = "") -> str:
    """The page with its blocks regenerated. Without latest, the markers are
    read from the page itself (a notebook that carries its own summary)."""
    if latest is None:
        latest = {}
        markers(text, name, "", latest)
    lines = text.split("\n")
    out: list = []
    placed: dict = {}
    plain_block = False
    i = 0
    while i < len(lines):
        m = BEGIN_KINDS.match(lines[i])
        is_plain = lines[i].strip() == BEGIN
        if lines[i].strip().startswith("<!-- bench:summary:begin") and not m and not is_plain:
            raise Fail(f"{name}:{i + 1}: a bench:summary:begin line is '{BEGIN}' or names kinds=\"...\"")
        if not m and not is_plain:
            if lines[i].strip() == END:
                raise Fail(f"{name}:{i + 1}: '{END}' without a begin line")
            out.append(lines[i])
            i += 1
            continue
        j = next((k for k in range(i + 1, len(lines)) if lines[k].strip() == END), None)
        if j is None:
            raise Fail(f"{name}:{i + 1}: bench:summary:begin without '{END}'")
        if is_plain:
            plain_block = True
            kinds = list(latest)
        else:
            kinds = m.group(1).split()
            for kind in kinds:
                if kind not in latest:
                    raise Fail(f"{name}:{i + 1}: kind '{kind}' has no bench:figure marker in {history or name}")
                if kind in placed:
                    raise Fail(f"{name}:{i + 1}: kind '{kind}' is already shown at line {placed[kind]}")
                placed[kind] = i + 1
        generated = block(kinds, latest, history, full=not is_plain)
        for line in generated:
            # Link targets are anchors ("#52-b-at-..."), not citations.
            if ISSUE.search(re.sub(r"\]\([^)]*\)", "]", line)):
                raise Fail(f"{name}:{i + 1}: the generated row would cite an issue number, "
                           f"reword its marker: {line[:120]}")
        out.append(lines[i])
        out.extend(generated)
        out.append(lines[j])
        i = j + 1
    if not placed and not plain_block:
        raise Fail(f"{name} needs a '{BEGIN}' line or '<!-- bench:summary:begin kinds=\"...\" -->' lines, "
                   f"each with a '{END}' line after it")
    missing = [k for k in latest if k not in placed]
    if missing and not plain_block:
        raise Fail(f"{name}: no bench:summary block shows kind(s) {', '.join(missing)}; "
                   "add each to the block of the section that answers its question")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    page = ROOT / "docs" / "benchmarks.md"
    ap.add_argument("--doc", default=str(page), help="the page to write the blocks into")
    ap.add_argument("--history", help="the notebook's directory (default: docs/bench-history for "
                    "docs/benchmarks.md; none for another --doc, whose own markers are used)")
    ap.add_argument("--check", action="store_true", help="fail if a block is stale instead of writing it")
    args = ap.parse_args()
    path = Path(args.doc)
    text = path.read_text()
    history = args.history
    if history is None and path.resolve() == page.resolve():
        history = str(ROOT / "docs" / "bench-history")
    latest: dict = {}
    try:
        # The page's own markers (none on docs/benchmarks.md), then the notebook's.
        markers(text, args.doc, "", latest)
        history_name = ""
        if history is not None:
            hist = Path(history)
            history_name = os.path.relpath(hist.resolve(), ROOT) + "/"
            files = sorted(hist.glob("*.md"))
            if not files:
                raise Fail(f"no notebook files (*.md) in {history}")
            for f in files:
                link = os.path.relpath(f.resolve(), path.resolve().parent)
                markers(f.read_text(), os.path.relpath(f.resolve(), ROOT), link, latest)
        new = rewrite(text, args.doc, latest, history_name)
    except Fail as e:
        sys.exit(f"bench-summary: {e}")
    if args.check:
        if new != text:
            sys.exit(f"bench-summary: the generated tables in {args.doc} are stale; run tools/bench-summary.py")
    elif new != text:
        path.write_text(new)


if __name__ == "__main__":
    main()
