#!/usr/bin/env python3
"""Checks docs/layout.md against include/ringcast/layout.hpp.

The header pins every offset of the ring file with a static_assert; the
document describes the same bytes for people. This compares them, so neither
can drift without CI saying so (tools/test.sh runs it before building):

  * every field row of a struct's table in the document (its first
    backticked name, or `reserved`) has the offset the header asserts for
    that member; a row naming no member (a slot's `meta` inside `words`)
    must start inside a member's bytes;
  * every member the header asserts an offset for appears in the document,
    by name or by a row starting at its offset;
  * the offsets in the box diagram and in each table's heading match
    RingHeader's members and kHeaderBytes;
  * the layout version the document states (twice) is kLayoutVersion.

  tools/layout-docs.py           check; print each mismatch, exit 1 if any
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include/ringcast/layout.hpp"
DOC = ROOT / "docs/layout.md"

# Document section heading name -> (struct in layout.hpp, RingHeader members it sits at).
SECTIONS = {
    "ProducerLine": ("ProducerLine", ["producer"]),
    "TailLine": ("TailLine", ["tail"]),
    "WaitLine": ("WaitLine", ["data_wait", "space_wait"]),
    "ConsumerEntry": ("ConsumerEntry", ["consumers"]),
    "Slot": ("Slot", []),
    "Doorbell": ("Doorbell", []),
}
# Document names for bytes inside a member: a slot's `words` hold the
# length (`meta`) and the payload.
ALIASES = {"Slot": {"meta": "words"}}
# Box diagram label -> RingHeader member ("" for the slots at kHeaderBytes).
DIAGRAM = {
    "ProducerLine": "producer",
    "TailLine": "tail",
    "WaitLine data_wait": "data_wait",
    "WaitLine space_wait": "space_wait",
    "ConsumerEntry 0": "consumers",
    "Slot 0": "",
}


def header_facts(text):
    offsets = {}  # struct -> {member: offset}
    for struct, member, value in re.findall(r"offsetof\((\w+),\s*(\w+)\)\s*==\s*(\d+)", text):
        offsets.setdefault(struct, {})[member] = int(value)
    sizes = {}  # struct -> {member: bytes}, from the declarations
    for struct, body in re.findall(r"struct (?:alignas\(\w+\) )?(\w+) \{(.*?)\n\};", text, re.S):
        for decl in body.split(";"):
            decl = re.sub(r"//[^\n]*", "", decl).strip()
            m = re.match(r"(std::atomic<std::uint(\d+)_t>|std::uint8_t|\w+)\s+(\w+)(?:\[(\w+)\])?$", decl)
            if not m:
                continue
            unit = int(m.group(2)) // 8 if m.group(2) else 1
            count = m.group(4)
            n = int(count) if count and count.isdigit() else (7 if count else 1)
            sizes.setdefault(struct, {})[m.group(3)] = unit * n
    header_bytes = re.search(r"kHeaderBytes == (\d+)", text)
    version = re.search(r"kLayoutVersion = (\d+);", text)
    return offsets, sizes, int(header_bytes.group(1)), int(version.group(1))


def doc_sections(text):
    """Yields (heading name, heading line, [(offset, size, field)])."""
    for block in re.split(r"\n(?=## )", text):
        m = re.match(r"## (\w+) \((.*?)\)", block)
        if not m or m.group(1) not in SECTIONS:
            continue
        rows = []
        for line in block.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 3 or not cells[0].isdigit():
                continue
            name = re.search(r"`(\w+)`", cells[2])
            field = name.group(1) if name else ("reserved" if cells[2].startswith("reserved") else None)
            rows.append((int(cells[0]), cells[1], field))
        yield m.group(1), m.group(2), rows


def main():
    header = HEADER.read_text()
    doc = DOC.read_text()
    offsets, sizes, header_bytes, version = header_facts(header)
    ring = offsets["RingHeader"]
    problems = []

    for name, heading, rows in doc_sections(doc):
        struct, placed = SECTIONS[name]
        members = offsets.get(struct, {})
        for member in placed:
            if not re.search(rf"\b{ring[member]}\b", heading):
                problems.append(f"'## {name} ({heading})': RingHeader::{member} is at {ring[member]}")
        if name == "Slot" and str(header_bytes) not in heading:
            problems.append(f"'## Slot ({heading})': slots start at kHeaderBytes = {header_bytes}")
        starts = {off for off, _, _ in rows}
        aliases = ALIASES.get(name, {})
        for off, _, field in rows:
            if field in members:
                if members[field] != off:
                    problems.append(f"{name}.{field}: docs/layout.md says {off}, layout.hpp asserts {members[field]}")
                continue
            if field is not None and field not in aliases:
                problems.append(f"{name}: the row at {off} names `{field}`, which layout.hpp does not have")
                continue
            owner = aliases.get(field)
            inside = any(start <= off < start + sizes.get(struct, {}).get(m, 0)
                         for m, start in members.items() if owner in (None, m))
            if not inside:
                problems.append(f"{name}: the row at {off} ({field or 'unnamed'}) lies in no member of layout.hpp")
        for member, off in members.items():
            named = any(field == member for _, _, field in rows)
            if not named and off not in starts:
                problems.append(f"{name}.{member} (offset {off}) is missing from docs/layout.md")

    diagram = re.findall(r"offset (\d+)\s+\+-+\+\n\s+\| ([\w ]+?)(?: \(| *\|)", doc)
    seen = set()
    for off, label in diagram:
        label = label.strip()
        if label not in DIAGRAM:
            continue
        seen.add(label)
        member = DIAGRAM[label]
        want = ring[member] if member else header_bytes
        if int(off) != want:
            problems.append(f"diagram: '{label}' at offset {off}, layout.hpp puts it at {want}")
    for label in DIAGRAM:
        if label not in seen:
            problems.append(f"diagram: no 'offset N' line for '{label}'")

    stated = re.findall(r"Layout version: \*\*(\d+)\*\*|`layout_version` = (\d+)", doc)
    for pair in stated:
        value = int(pair[0] or pair[1])
        if value != version:
            problems.append(f"docs/layout.md states layout version {value}, kLayoutVersion is {version}")
    if len(stated) < 2:
        problems.append("docs/layout.md should state the layout version in its opening and in the ProducerLine table")

    for p in problems:
        print(f"layout-docs: {p}")
    if problems:
        print(f"layout-docs: {len(problems)} mismatch(es) between docs/layout.md and include/ringcast/layout.hpp")
        return 1
    print("layout-docs: docs/layout.md matches include/ringcast/layout.hpp")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0)
    sys.exit(main())
