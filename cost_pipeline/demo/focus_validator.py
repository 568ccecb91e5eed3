"""The FinOps Foundation's `focus-validator` 2.2.1 run on a FOCUS file, its summary parsed.

It runs in a virtual environment of its own (`tool_venvs.focus_validator_site`), from its
site-packages folder (it opens its bundled currency codes by a relative path), offline
(`--block-download`: its FOCUS 1.2 rules are bundled). It exits 0 whatever it found, so the
outcome is read from its console summary: `Total: N | Pass: P | Fail: F | Skipped: S` and one
`- RuleId: violations=…` line per failed rule.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cost_pipeline.demo.tool_venvs import ToolUnavailable, focus_validator_site

SUMMARY = re.compile(r"Total: (\d+) \| Pass: (\d+) \| Fail: (\d+) \| Skipped: (\d+)")
FAILED = re.compile(r"^- ([A-Za-z]+-[A-Z]-\d{3}-[A-Z]): (.*)$", re.MULTILINE)
TIMEOUT_SECONDS = 300
# Its two InvoiceId nullability rules are the alternatives of one OR (InvoiceId-C-003-C:
# all rows invoiced, or none): the OR passes, yet the alternative not taken is counted as a
# failed rule, so every non-empty dataset with an InvoiceId column fails one of them (and
# one without the column fails the RECOMMENDED presence rule and its children).
EXCLUSIVE_ALTERNATIVES = {"InvoiceId-C-003-C": ("InvoiceId-C-004-C", "InvoiceId-C-005-C")}


@dataclass
class ValidatorReport:
    total: int
    passed: int
    failed: int
    skipped: int
    failures: dict[str, str] = field(default_factory=dict)  # rule id → its summary line
    output: str = ""

    def passed_rules(self) -> set[str]:
        return set(re.findall(r"^\S+ ([A-Za-z]+-[A-Z]-\d{3}-[A-Z]): PASS", self.output,
                              re.MULTILINE))

    def real_failures(self) -> dict[str, str]:
        """The failed rules less an alternative not taken of an OR that passed."""
        passed = self.passed_rules()
        excused = {rule for parent, rules in EXCLUSIVE_ALTERNATIVES.items() if parent in passed
                   for rule in rules}
        return {rule: line for rule, line in self.failures.items() if rule not in excused}


def _check_criteria(site: Path, version: str, criteria: Sequence[str]) -> None:
    """A criterion its rules file does not know is only a warning in the validator's log (and
    its rules silently skipped): refused here instead."""
    for rules in sorted(site.glob(f"focus_validator/rules/model-{version}.*.json"))[-1:]:
        known = set(json.loads(rules.read_text(encoding="utf-8"))["ApplicabilityCriteria"])
        unknown = [c for c in criteria if c not in known and c.upper() != "ALL"]
        if unknown:
            raise ValueError(f"unknown applicability criteria {', '.join(unknown)} "
                             f"(FOCUS {version}: {', '.join(sorted(known))})")


def validate_focus(path: str | Path, version: str = "1.2",
                   applicability_criteria: Sequence[str] = ()) -> ValidatorReport:
    """Run focus-validator on the parquet (or CSV) file at `path` against FOCUS `version`.

    `applicability_criteria` are what the provider supports (the ids of its rules file's
    `ApplicabilityCriteria`, e.g. REGION_SUPPORTED): the rules under a criterion are checked
    only when it is given (a rule under several when any of them is); none given, they are
    all skipped."""
    site = focus_validator_site()
    python = site.parents[2] / "bin" / "python"  # <venv>/lib/pythonX.Y/site-packages
    command = [str(python), "-m", "focus_validator.main", "--data-file",
               str(Path(path).resolve()), "--validate-version", version, "--block-download"]
    if applicability_criteria:
        _check_criteria(site, version, applicability_criteria)
        command += ["--applicability-criteria", ",".join(applicability_criteria)]
    done = subprocess.run(command, cwd=site, capture_output=True, text=True,
                          timeout=TIMEOUT_SECONDS)
    output = done.stdout + done.stderr
    summary = SUMMARY.search(output)
    if summary is None:
        tail = " | ".join(line for line in output.strip().splitlines()[-3:])
        raise ToolUnavailable(f"focus-validator printed no summary (exit {done.returncode}): "
                              f"{tail}")
    total, passed, failed, skipped = map(int, summary.groups())
    failures = {m.group(1): m.group(2) for m in FAILED.finditer(output)}
    return ValidatorReport(total, passed, failed, skipped, failures, output)
