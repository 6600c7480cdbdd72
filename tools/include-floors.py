#!/usr/bin/env python3
"""Checks that includes inside src/broker run one way, down the floors that
docs/architecture.md draws (its "top / 5 / 4 / ... / 1" block): a file may
include a room of a lower floor or its own room, never a room beside it or
above it (the top floor's rooms excepted: the facade builds the server), and
only the facade (broker.cpp) includes its public header,
ringcast/broker/broker.hpp, so that nothing below includes the facade that
includes it. The floors are read from the document, so the
picture and the code cannot drift apart. Exit 1 with one line per offending
include.

  tools/include-floors.py
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
SRC = ROOT / "src" / "broker"
FACADE = "ringcast/broker/broker.hpp"
ROOM_COLUMN = slice(9, 41)  # the rooms column of the floor block


def floors_from_doc():
    """{room: floor number}: rooms are folders ("core") and the top floor's
    files ("broker.cpp"); the top floor is numbered above every other."""
    floors, current, in_block = {}, None, False
    for line in DOC.read_text().splitlines():
        label = line[:9].strip()
        if re.fullmatch(r"top|\d", label):
            in_block = True
            current = label
        elif in_block and (line.strip() in ("v", "```") or not line.strip()):
            if line.strip() == "```":
                break
            continue
        elif not in_block:
            continue
        for name in re.split(r"[,\s]+", line[ROOM_COLUMN].strip()):
            if name:
                floors[name.rstrip("/")] = current
    if not floors:
        sys.exit(f"{DOC}: no floor block found")
    top = max(int(f) for f in floors.values() if f != "top") + 1
    return {room: top if f == "top" else int(f) for room, f in floors.items()}


def room_of(path, floors):
    rel = path.relative_to(SRC)
    room = rel.parts[0] if len(rel.parts) > 1 else rel.name
    if room not in floors:
        sys.exit(f"{path}: its room '{room}' is on no floor of {DOC.name}")
    return room


def main():
    floors = floors_from_doc()
    top = max(floors.values())
    bad = []
    for path in sorted(SRC.rglob("*.[ch]pp")):
        room = room_of(path, floors)
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r'#include "(broker/([a-z_]+)/|ringcast/broker/broker\.hpp)', line)
            if not m:
                continue
            if m.group(1) == FACADE:
                if room != "broker.cpp":
                    bad.append(f"{path.relative_to(ROOT)}:{n}: includes the facade's {FACADE}; only broker.cpp may")
                continue
            target = m.group(2)
            if target not in floors:
                bad.append(f"{path.relative_to(ROOT)}:{n}: includes broker/{target}/, a room on no floor")
            elif target != room and floors[target] >= floors[room] and floors[room] != top:
                bad.append(
                    f"{path.relative_to(ROOT)}:{n}: {room}/ (floor {floors[room]}) includes {target}/ "
                    f"(floor {floors[target]}): includes run down the floors only ({DOC.name})"
                )
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
