"""The config file's text read as YAML 1.2 data: PyYAML's safe loader (YAML 1.1) with YAML
1.2's numbers, refusing what cannot be read as written (a key twice in one mapping, a key
read as a boolean, a date no calendar holds), and PyYAML's errors as the rest of one line."""

from __future__ import annotations

import re

import yaml


class Yaml12Float(str):
    """A plain scalar YAML 1.2 reads as a float and PyYAML (YAML 1.1) as text: `1e6`, `1.0e6`,
    `2e-3`, `-.5`. The config's reader keeps it as the text written; only a numeric field
    reads the number (`Number`): an experiment, tag or dataset called `1e6` stays its name."""


class Unreadable(ValueError):
    """What the file writes cannot be read as written: a key twice in one mapping, a key YAML
    reads as a boolean, a date no calendar holds. Its message starts with the line (and
    column)."""


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing a key written twice in one mapping: PyYAML keeps the
    last, and a second `billing:` dropped the first's sources without a word. A plain
    scalar that YAML 1.2 reads as a float and YAML 1.1 as text (`1e6`) is a `Yaml12Float`:
    `approval_budget: 1e6` was refused as no number."""

    def construct_mapping(self, node, deep=False):
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` merges, not repeats
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, bool):  # no key of the config is a boolean: a name is meant
                raise Unreadable(
                    f"line {line} column {key_node.start_mark.column + 1}: YAML reads the key "
                    f"{key_node.value} as the boolean {str(key).lower()}: quote it "
                    f"('{key_node.value}') if it is a name")
            if isinstance(key, str | int | float | bool) and key in seen:
                raise Unreadable(f"line {line}: key {key!r} written twice (first at line "
                                 f"{seen[key]}): keep one")
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node):
        """A date or timestamp that does not exist (`2015-02-30`, `2015-13-01`) named by its
        line and column: it was `day is out of range for month`, no file, no key, and a
        ValueError the code location did not catch."""
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as exc:
            mark = node.start_mark
            raise Unreadable(f"line {mark.line + 1} column {mark.column + 1}: {node.value} "
                             f"reads as a date, but there is no such date ({exc}); quote it "
                             "if it is text") from None


# YAML 1.2's numbers (core schema) where PyYAML reads YAML 1.1's: `010` is ten (YAML 1.1's
# octal, 8: `hour_of_day: 010` ran at 08:00, and `08` was refused), an octal is written `0o10`;
# `1:30` (1.1's base 60: `grace_days: 1:30` was 90) and `1_000` are text, refused where a
# number is expected. Each resolver keeps its place: a timestamp is still tried after them
_YAML12_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_YAML12_RESOLVED = {
    "tag:yaml.org,2002:int": _YAML12_INT,
    "tag:yaml.org,2002:float": re.compile(
        r"^(?:[-+]?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?|\.[0-9]+(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
}
UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, _YAML12_RESOLVED.get(tag, regexp)) for tag, regexp in resolvers]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def _yaml12_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    if not _YAML12_INT.match(text):  # an explicit `!!int 0b101`: YAML 1.1's reading
        return loader.construct_yaml_int(node)
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _yaml12_int)

# YAML 1.2's float (core schema) with a point or an exponent; what YAML 1.1 reads as a number
# (`1.5`, `1.0e+6`, `10`) its own resolvers, tried first, still read
_YAML12_FLOAT_TAG = "tag:cost-pipeline,2024:yaml12-float"
UniqueKeyLoader.add_implicit_resolver(
    _YAML12_FLOAT_TAG,
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?$"),
    list("-+.0123456789"))
UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp",
                                UniqueKeyLoader.construct_yaml_timestamp)
UniqueKeyLoader.add_constructor(
    _YAML12_FLOAT_TAG, lambda loader, node: Yaml12Float(loader.construct_scalar(node)))


def read_yaml(text: str) -> object:
    """The config file's text as data; `Unreadable` or PyYAML's `YAMLError` when it cannot be
    read as written."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)


def yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """PyYAML's error as the rest of one line: ` line L column C: not valid YAML: problem
    (context)`. Its own message spans several lines and quotes the text with a caret."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return (f" line {line} column {column}: not valid YAML: character "
                f"#x{exc.character:04x} ({exc.reason})")
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or problem is None:
        return f": not valid YAML: {' '.join(str(exc).split())}"
    where = f" line {mark.line + 1} column {mark.column + 1}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None and context_mark.line != mark.line:
        context = f"{context} that starts at line {context_mark.line + 1} column " \
                  f"{context_mark.column + 1}"
    return f"{where}: not valid YAML: {problem}" + (f" ({context})" if context else "")
