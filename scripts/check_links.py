# SPDX-License-Identifier: PostgreSQL
"""scripts/check_links.py — every relative link and every #anchor in
README.md and docs/*.md (and in every other Markdown file of the tree they
link to) must point at something that exists.

A link is checked against the tree, relative to the file that holds it (a
leading "/" is the top of the tree): the file or directory must exist, and
an anchor must name a heading of the Markdown file it points into — as
GitHub makes it: the heading's text as shown (code spans, links and
emphasis reduced to their text), lower-cased, every character dropped but
letters, digits, '-', '_' and spaces, spaces turned into '-'; the second
heading of the same anchor gets "-1", the third "-2", … — or an anchor
given explicitly (<a name="…">, id="…").  An anchor into a file that is
not Markdown must be a line reference (#L12, #L12-L20).  Only ATX headings
("## …") are recognised.  Links inside code blocks and code spans are not
links.  External links (http:, https:, mailto:, …) are not fetched: they
are counted as skipped, by design, and neither pass nor fail.

Prints "ok   <file>: <link>" or "FAIL <file>: <link>: <why>" per link and
last "links: N passed, M failed" (regress/checklib.py; scripts/check.sh
counts that line).  Exits non-zero on any failure.  Needs no server.
Usage: /usr/bin/python3 scripts/check_links.py [ROOT]
"""

import os
import re
import sys
import unicodedata
from urllib.parse import unquote

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "regress"))
import checklib  # noqa: E402

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, ".."))

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']*)[\"']", re.I)
HTML_ANCHOR = re.compile(r"<[a-z][^>]*?\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.I)
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def blocks(text):
    """The file's text outside fenced code blocks, as a list of lines
    (fenced lines blanked, so that paragraphs stay apart)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)[0]
            elif m.group(1)[0] == fence:
                fence = None
            out.append("")
            continue
        out.append("" if fence else line)
    return out


def without_code(lines):
    """The text of blocks() without its code spans (which never cross a
    blank line: they are stripped paragraph by paragraph)."""
    paras = "\n".join(lines).split("\n\n")
    return "\n\n".join(CODE_SPAN.sub("", p) for p in paras)


def shown(text):
    """A heading's text as GitHub shows it: code spans as they are, links
    and emphasis reduced to their text, HTML tags dropped."""
    parts = []
    pos = 0
    for m in CODE_SPAN.finditer(text):
        parts.append(prose_inline(text[pos:m.start()]))
        parts.append(m.group(2).strip())
        pos = m.end()
    parts.append(prose_inline(text[pos:]))
    return "".join(parts).strip()


def prose_inline(text):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"(\*\*|__|\*)", "", text)


def slug(heading):
    kept = [ch for ch in shown(heading).lower()
            if unicodedata.category(ch)[0] in "LMN" or unicodedata.category(ch) == "Pc"
            or ch in " -"]
    return "".join(kept).replace(" ", "-")


_anchors = {}


def anchors(path):
    """Every anchor of a Markdown file: its headings' and the explicit ones."""
    if path not in _anchors:
        with open(path, encoding="utf-8") as f:
            lines = blocks(f.read())
        found, seen = set(), {}
        for line in lines:
            m = ATX.match(line)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else "%s-%d" % (s, n))
        for m in HTML_ANCHOR.finditer(without_code(lines)):
            found.add(m.group(1))
        _anchors[path] = found
    return _anchors[path]


def links(path):
    """The link targets of a Markdown file, in order."""
    with open(path, encoding="utf-8") as f:
        text = without_code(blocks(f.read()))
    found = []
    for m in INLINE_LINK.finditer(text):
        found.append((m.start(), m.group(1)))
    for m in REF_DEF.finditer(text):
        found.append((m.start(), m.group(1)))
    for m in HTML_LINK.finditer(text):
        found.append((m.start(), m.group(1)))
    return [t for _, t in sorted(found)]


def check_link(src, target):
    """None if the link resolves, else why not.  Also returns the Markdown
    file it leads to, if any, for the crawl."""
    where, _, frag = target.partition("#")
    where, frag = unquote(where), unquote(frag)
    if where == "":
        dest = src
    elif where.startswith("/"):
        dest = os.path.normpath(os.path.join(ROOT, where.lstrip("/")))
    else:
        dest = os.path.normpath(os.path.join(os.path.dirname(src), where))
    if not (dest == ROOT or dest.startswith(ROOT + os.sep)):
        return "points outside the tree", None
    if not os.path.exists(dest):
        return "no such file or directory: %s" % os.path.relpath(dest, ROOT), None
    md = dest if dest.endswith(".md") and os.path.isfile(dest) else None
    if frag:
        if md:
            if frag not in anchors(md):
                return "no anchor #%s in %s" % (frag, os.path.relpath(md, ROOT)), md
        elif not (os.path.isfile(dest) and re.fullmatch(r"L\d+(-L\d+)?", frag)):
            return "anchor #%s in a file that is not Markdown" % frag, None
    return None, md


def main():
    todo = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        todo += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    done = set()
    skipped = 0
    while todo:
        src = todo.pop(0)
        if src in done:
            continue
        done.add(src)
        name = os.path.relpath(src, ROOT)
        for target in links(src):
            if target == "":
                checklib.check("%s: (empty link)" % name, False, "a link with no target")
                continue
            if EXTERNAL.match(target):
                skipped += 1
                print("skip %s: %s: external, not fetched" % (name, target))
                continue
            why, md = check_link(src, target)
            checklib.check("%s: %s" % (name, target), why is None, why)
            if md and md not in done:
                todo.append(md)
    print("skipped: %d external links (not fetched, by design); %d Markdown files read"
          % (skipped, len(done)))


if __name__ == "__main__":
    checklib.run("links", main)
