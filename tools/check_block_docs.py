#!/usr/bin/env python3
"""Fails when the block documentation has drifted from the tree.

Generated documents are checked by tools/check_generated_docs.sh; the pages
written by hand are checked here, against what the tree holds now (nothing
below lists what exists: every list is discovered from the sources):

  * vp/nic/nic.md's file map names every source file directly in vp/nic/
    and every subfolder (each has its own page), and no file that is gone;
  * docs/README.md links every block page (vp/**/*.md) and every document in
    docs/, and every link of it leads to a file;
  * vp/platform/platform.md names every verb of the simulator's command line
    (the `cmd == "..."` comparisons of vp/sim/cli.cc);
  * README.md states no count of tests (they drift; a build's `ctest -N`
    has the number), and its count of mutations is that of
    tools/mutation/mutations.yaml;
  * every block page says what it does not model.

Prints one line per problem, naming the file and what is missing, and exits
1 if there is any (ctest docs.block_pages).

  tools/check_block_docs.py .
"""

import argparse
import re
import sys
from pathlib import Path

# A heading or sentence saying what a block page leaves out. Pages word it
# differently ("Accuracy", "Not modelled (yet):", "What it does not model").
NOT_MODELLED = re.compile(
    r"does not model|not modell?ed|^#+\s*(accuracy|what it does not model)",
    re.IGNORECASE | re.MULTILINE,
)

# Counts of tests or mutations in prose: "843 tests", "Four tests", "106
# mutations" (numbers may use spaces or commas between thousands). "one" is
# left out: "one test per finding" is a rule, not a count.
NUMBER = r"\d{1,3}(?:[ ,]\d{3})+|\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
COUNT_CLAIM = re.compile(rf"\b({NUMBER})\s+(tests?|test cases|mutations?)\b", re.IGNORECASE)

# Inline code spans, and a Markdown link's target.
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def section(text, title):
    """The lines under the heading whose text starts with `title`, up to the
    next heading of the same or a higher level; None without such a heading."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#+)\s+(.*)", line)
        if m and m.group(2).lower().startswith(title.lower()):
            level = len(m.group(1))
            body = []
            for rest in lines[i + 1 :]:
                n = re.match(r"(#+)\s", rest)
                if n and len(n.group(1)) <= level:
                    break
                body.append(rest)
            return body
    return None


def expand(span):
    """File names in one code span: `nic.h/.cc` and `scenario.{h,cc}` are the
    pages' shorthand for a header and its source."""
    m = re.fullmatch(r"(.+)\.(?:h/\.cc|\{h,cc\})", span)
    return [f"{m.group(1)}.h", f"{m.group(1)}.cc"] if m else [span]


def rel(path, root):
    return path.relative_to(root).as_posix()


def check_file_map(root, page, folder):
    """The page's "File map" section names every *.h and *.cc directly in
    `folder` (by basename, in a code span) and every subfolder (`name/`); the
    first column of its table names only files and folders that exist."""
    text = page.read_text(encoding="utf-8")
    where, home = rel(page, root), rel(folder, root)
    body = section(text, "File map")
    if body is None:
        return [f"{where}: no '## File map' section (it must name every file in {home}/)"]
    spans = [name for s in CODE_SPAN.findall("\n".join(body)) for name in expand(s)]
    problems = []
    for f in sorted(folder.iterdir()):
        if f.is_file() and f.suffix in (".h", ".cc") and f.name not in spans:
            problems.append(f"{where}: file map does not mention `{f.name}`")
        elif f.is_dir() and not any(s.startswith(f.name + "/") for s in spans):
            problems.append(f"{where}: file map does not mention the folder `{f.name}/`")
    # The other direction: a row naming a file that moved or went away (the
    # first column holds files, folders and the odd glob: `firmware/firmware*.h`).
    for line in body:
        cells = line.split("|")
        if not line.startswith("|") or len(cells) < 3:
            continue
        for s in CODE_SPAN.findall(cells[1]):
            for name in expand(s):
                if not list(folder.glob(name)):
                    problems.append(f"{where}: file map names `{name}`, not in {home}/")
    return problems


def check_docs_index(root):
    """docs/README.md links every block page and every other document in
    docs/, and none of its relative links is broken."""
    index = root / "docs" / "README.md"
    text = index.read_text(encoding="utf-8")
    linked = set()
    problems = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor of this page
        path = (index.parent / target.split("#")[0]).resolve()
        if not path.exists():
            problems.append(f"docs/README.md: link `{target}` leads to nothing")
        linked.add(path)
    pages = list(root.glob("vp/**/*.md")) + list(root.glob("docs/**/*.md"))
    for page in sorted(pages):
        if page != index and page.resolve() not in linked:
            problems.append(f"docs/README.md: does not link {rel(page, root)}")
    return problems


def check_cli_verbs(root):
    """platform.md names, in a code span, every verb the simulator's
    command line dispatches on."""
    cli = root / "vp" / "sim" / "cli.cc"
    verbs = re.findall(r'\bcmd == "([^"]+)"', cli.read_text(encoding="utf-8"))
    if not verbs:
        # The dispatch changed shape: this check would pass vacuously.
        return ['vp/sim/cli.cc: no `cmd == "..."` verbs found; update tools/check_block_docs.py']
    page = root / "vp" / "platform" / "platform.md"
    text = page.read_text(encoding="utf-8")
    return [
        f"vp/platform/platform.md: does not name the command `{v}` (vp/sim/cli.cc)"
        for v in verbs
        if not re.search(rf"`{re.escape(v)}[` ]", text)
    ]


def check_readme_counts(root):
    """README.md gives no count of tests, and a count of mutations only if it
    is the number of entries in tools/mutation/mutations.yaml."""
    mutations = root / "tools" / "mutation" / "mutations.yaml"
    entries = len(re.findall(r"^\s*- id:", mutations.read_text(encoding="utf-8"), re.MULTILINE))
    if entries == 0:
        return [
            "tools/mutation/mutations.yaml: no `- id:` entries found; "
            "update tools/check_block_docs.py"
        ]
    # Counts may be broken across lines.
    text = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    problems = []
    for m in COUNT_CLAIM.finditer(text):
        digits = re.sub(r"[ ,]", "", m.group(1))
        if m.group(2).lower().startswith("mutation"):
            if not digits.isdigit():
                problems.append(f"README.md: '{m.group(0)}': write the mutation count in digits")
            elif int(digits) != entries:
                problems.append(
                    f"README.md: '{m.group(0)}', but tools/mutation/mutations.yaml has {entries}"
                )
        else:
            problems.append(
                f"README.md: '{m.group(0)}' counts tests, which drift as tests are added; "
                "say it without the number"
            )
    return problems


def check_not_modelled(root):
    """Every block page says what it does not model."""
    return [
        f"{rel(page, root)}: does not say what it does not model "
        "(add a 'What it does not model' section)"
        for page in sorted(root.glob("vp/**/*.md"))
        if not NOT_MODELLED.search(page.read_text(encoding="utf-8"))
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="the repository's root")
    root = parser.parse_args().root.resolve()
    problems = (
        check_file_map(root, root / "vp" / "nic" / "nic.md", root / "vp" / "nic")
        + check_docs_index(root)
        + check_cli_verbs(root)
        + check_readme_counts(root)
        + check_not_modelled(root)
    )
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} problems in the block documentation", file=sys.stderr)
        return 1
    pages = len(list(root.glob("vp/**/*.md")))
    print(f"block documentation matches the tree ({pages} block pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
