#!/usr/bin/env python3
"""Checks the relative links of the project's Markdown pages (README.md, docs/**.md): every file a
link or picture names exists, and every #anchor is a heading of the page it points to (anchors as
GitHub makes them). Run by ctest as docs.links; prints each broken link with its page and line.

    scripts/check-doc-links.py [ROOT]
"""
import pathlib
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page):
    seen, found = {}, set()
    in_code = False
    for line in page.read_text().split("\n"):
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            base = anchor(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(page):
    in_code = False
    for number, line in enumerate(page.read_text().split("\n"), 1):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            yield number, target


def main(root):
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    problems = []
    for page in pages:
        for number, target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, fragment = target.partition("#")
            goal = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(root)}:{number}"
            if not goal.exists():
                problems.append(f"{where}: {target}: no such file")
            elif fragment and goal.suffix == ".md" and fragment not in anchors(goal):
                problems.append(f"{where}: {target}: no heading '#{fragment}' in {goal.relative_to(root)}")
    for p in problems:
        print(p)
    print(f"{len(pages)} pages, {len(problems)} broken links")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
