"""The trained model's corpus: English prose from a Debian package, as bytes.

The Python 3.11 documentation ships in Debian's `python3.11-doc` package
(`apt-get install python3.11-doc`; `python3-doc` depends on it) with every
page's reStructuredText source as plain text under
/usr/share/doc/python3.11/html/_sources/ (about 500 `*.rst.txt` files,
11 MB): the tutorial, the HOWTOs, the FAQ, the language and library
references. `stage` keeps their prose: it drops code blocks (literal blocks
after `::`, code/doctest directives, `>>>` sessions), directive lines and
their options, heading underlines and tables, unwraps inline markup
(:role:`text` -> text, ``code`` -> code), and splits by file: a file whose
path hashes to 0 mod 20 is held out (about 5 %), the rest is training text.
Any Debian machine can install the package; `--root` reads an unpacked copy
(`dpkg -x python3.11-doc_*.deb DIR`) instead of /.
"""

import glob
import hashlib
import json
import os
import re

PACKAGE = "python3.11-doc"
SOURCES = "usr/share/doc/python3.11/html/_sources"
HELD_OUT_MOD = 20

_ROLE = re.compile(r":[a-zA-Z:+-]+:`([^`]*)`")
_LITERAL = re.compile(r"``([^`]*)``")
_LINK = re.compile(r"`([^`<]*?)\s*(<[^>]*>)?`_{1,2}")
_UNDERLINE = re.compile(r"^([=\-~^\"'*+#`.:_])\1{2,}\s*$")
_CODE_DIRECTIVES = ("code-block", "sourcecode", "code", "doctest", "testcode", "testoutput",
                    "productionlist", "highlight", "literalinclude", "toctree", "csv-table",
                    "list-table", "table", "image", "figure", "raw", "only", "index",
                    "tabularcolumns", "moduleauthor", "sectionauthor", "audit-event",
                    "include", "rubric", "grammar-snippet")
_ADMONITIONS = ("note", "warning", "seealso", "versionadded", "versionchanged", "deprecated",
                "tip", "important", "impl-detail", "caution", "attention")


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _unwrap(text):
    def role(m):  # :func:`name <target>` -> name; :ref:`~a.b` -> a.b
        inner = re.sub(r"\s*<[^>]*>$", "", m.group(1)).lstrip("~!")
        return inner
    text = _ROLE.sub(role, text)
    text = _LITERAL.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    return text.replace("\\", "")


def prose(rst):
    """The prose of one reStructuredText page (see the module docstring)."""
    out, skip_below = [], None
    lines = rst.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if skip_below is not None:
            if stripped == "" or _indent(line) > skip_below:
                continue  # inside a literal block or a directive's body
            skip_below = None
        if stripped.startswith(".. "):
            name = stripped[3:].split("::", 1)[0].strip()
            if "::" not in stripped or name in _CODE_DIRECTIVES:
                skip_below = _indent(line)  # a comment, a link target, code, a table
                continue
            # Any other directive (function, class, note, ...): its body is
            # prose; an admonition's text may start on the directive's line.
            line = stripped.split("::", 1)[1] if name in _ADMONITIONS else ""
        if stripped.startswith((">>>", "...", "$ ", "|", "+-", "+=")):
            continue
        if _UNDERLINE.match(line) or stripped.startswith(":") and stripped.endswith(":"):
            continue
        if stripped.startswith(":") and ":" in stripped[1:]:  # a field list entry
            continue
        if stripped.endswith("::"):  # the next indented block is code
            line = line.rstrip()[:-1]
            skip_below = _indent(line)
        out.append(_unwrap(line).rstrip())
    text = "\n".join(out)
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n\s*\n+", "\n\n", text).strip() + "\n"


def held_out(relative_path, mod=HELD_OUT_MOD):
    digest = hashlib.sha256(relative_path.encode()).digest()
    return int.from_bytes(digest[:4], "little") % mod == 0


def stage(root, out_dir, held_out_mod=HELD_OUT_MOD):
    """Writes train.txt, heldout.txt and corpus.json under out_dir from the
    package's files under root (a file is held out when its path hashes to
    0 mod held_out_mod); returns the corpus.json dict."""
    base = os.path.join(root, SOURCES)
    files = sorted(glob.glob(os.path.join(base, "**", "*.rst.txt"), recursive=True))
    if not files:
        raise SystemExit(f"no {SOURCES}/**/*.rst.txt under {root}: "
                         f"apt-get install {PACKAGE} (or dpkg -x its .deb and pass --root)")
    os.makedirs(out_dir, exist_ok=True)
    parts = {"train": [], "heldout": []}
    counts = {"train": 0, "heldout": 0}
    for path in files:
        rel = os.path.relpath(path, base)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = prose(f.read())
        split = "heldout" if held_out(rel, held_out_mod) else "train"
        parts[split].append(text)
        counts[split] += 1
    info = {"package": PACKAGE, "files": f"/{SOURCES}/**/*.rst.txt",
            "held_out": f"sha256(relative path)[:4] little-endian % {held_out_mod} == 0"}
    for split, texts in parts.items():
        data = "\n".join(texts).encode("utf-8")
        with open(os.path.join(out_dir, f"{split}.txt"), "wb") as f:
            f.write(data)
        info[split] = {"files": counts[split], "bytes": len(data),
                       "sha256": hashlib.sha256(data).hexdigest()}
    with open(os.path.join(out_dir, "corpus.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def read_bytes(path):
    """A split's text as byte-level tokens (ids 0..255), a list of ints."""
    with open(path, "rb") as f:
        return list(f.read())


def windows(tokens, count, length, offset=0.0):
    """`count` windows of `length` tokens, evenly spaced over `tokens`
    (shifted by `offset` of a spacing), deterministic."""
    span = len(tokens) - length
    if span < count:
        raise ValueError(f"{len(tokens)} tokens do not hold {count} windows of {length}")
    step = span / count
    return [tokens[int((i + offset) * step):int((i + offset) * step) + length]
            for i in range(count)]
