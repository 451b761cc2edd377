"""Every QR_ environment variable the Python package reads is declared in
common/env_vars.h, the one table of variables (README.md's table is checked
against it by //common:env_vars_readme_test).

What counts as a read: every string literal of the package that is a whole
QR_ name (os.environ.get("QR_X"), os.environ["QR_X"], a dict of alias names)
and is not a name of the C ABI (comm/quickreduce.h: statuses, regimes) or of
the package's own status for an unknown code. A name built at run time
("QR_" + x) is not seen; the package builds none."""

import ast
import os
import re

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))  # the source tree, or Bazel's runfiles
_PACKAGE = os.path.join(os.path.dirname(_HERE), "quickreduce")
_NAME = re.compile(r"QR_[A-Z0-9_]+")
# errors.py's status for a code the C ABI does not define.
_NOT_VARIABLES = {"QR_UNKNOWN"}


def _read(*parts):
    with open(os.path.join(_ROOT, *parts)) as f:
        return f.read()


def declared_names(header):
    """The names in env_vars.h's kEnvVars, through their declarations."""
    names = dict(re.findall(r'inline constexpr EnvVar (kEnv\w+) =\s*Env\w+Var\(\s*"(QR_\w+)"',
                            header))
    table = re.search(r"kEnvVars\[\] = \{(.*?)\};", header, re.S)
    assert table, "env_vars.h has no kEnvVars table"
    listed = re.findall(r"&(kEnv\w+)", table.group(1))
    missing = [i for i in listed if i not in names]
    assert not missing, f"kEnvVars lists {missing}, whose declarations were not parsed"
    return {names[i] for i in listed}


def abi_names(header):
    """The enumerators and macros of comm/quickreduce.h (its comments name variables too)."""
    return set(re.findall(r"^\s*(QR_\w+)\s*(?:=|,|$)", header, re.M)) | \
        set(re.findall(r"^#\s*define\s+(QR_\w+)", header, re.M))


def names_read(source, filename="<source>"):
    """{QR_ name: [line, ...]} of the string literals that are whole QR_ names."""
    found = {}
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                _NAME.fullmatch(node.value):
            found.setdefault(node.value, []).append(node.lineno)
    return found


def undeclared(sources, declared, abi):
    """[(file, line, name)] of the names read that are neither declared nor the ABI's."""
    out = []
    for filename, source in sources:
        for name, lines in names_read(source, filename).items():
            if name not in declared and name not in abi and name not in _NOT_VARIABLES:
                out += [(filename, line, name) for line in lines]
    return sorted(out)


def _package_sources():
    out = []
    for root, _, files in os.walk(_PACKAGE, followlinks=True):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(root, f)
                with open(path) as fh:
                    out.append((os.path.relpath(path, os.path.dirname(_PACKAGE)), fh.read()))
    return out


@pytest.fixture(scope="module")
def tables():
    return (declared_names(_read("common", "env_vars.h")),
            abi_names(_read("comm", "quickreduce.h")))


def test_the_package_reads_only_declared_variables(tables):
    declared, abi = tables
    sources = _package_sources()
    assert len(sources) >= 10, f"found only {[f for f, _ in sources]} under {_PACKAGE}"
    bad = undeclared(sources, declared, abi)
    assert not bad, ("the Python package reads QR_ variables common/env_vars.h does not declare "
                     "(declare each there, add it to kEnvVars and README.md's table): " +
                     ", ".join(f"{n} ({f}:{line})" for f, line, n in bad))
    # The scan sees what the package reads (else the check above proves nothing).
    seen = set()
    for filename, source in sources:
        seen |= set(names_read(source, filename))
    assert {"QR_LIBRARY", "QR_VLLM", "QR_SGLANG", "QR_QUANTIZATION"} <= seen


def test_the_table_is_parsed_whole(tables):
    declared, abi = tables
    assert {"QR_LOG_LEVEL", "QR_QUANTIZATION", "QR_ALLOW_SHARED_DEVICE", "QR_LIBRARY"} <= declared
    assert {"QR_OK", "QR_PEER_FAILED", "QR_REGIME_FP"} <= abi
    assert not declared & abi


def test_an_undeclared_read_is_reported(tables):
    declared, abi = tables
    source = ('import os\n'
              'a = os.environ.get("QR_QUANTIZATION")\n'
              'b = os.environ.get("QR_NOT_IN_THE_TABLE") == "1"\n'
              'c = {"THEIRS": "QR_ALSO_MISSING"}\n'
              'status = "QR_PEER_FAILED"\n'
              '"""QR_IN_PROSE is not a read"""\n')
    assert undeclared([("x.py", source)], declared, abi) == [
        ("x.py", 3, "QR_NOT_IN_THE_TABLE"), ("x.py", 4, "QR_ALSO_MISSING")]
