"""The FinOps Foundation's `focus-validator` 2.2.1 run on a FOCUS file, its summary parsed.

It runs in a virtual environment of its own (`tool_venvs.focus_validator_site`), from its
site-packages folder (it opens its bundled currency codes by a relative path), offline
(`--block-download`: its FOCUS 1.2 rules are bundled). It exits 0 whatever it found, so the
outcome is read from its console summary: `Total: N | Pass: P | Fail: F | Skipped: S` and one
`- RuleId: violations=…` line per failed rule.
"""

from __future__ import annotations

import re
import subprocess
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


def validate_focus(path: str | Path, version: str = "1.2") -> ValidatorReport:
    """Run focus-validator on the parquet (or CSV) file at `path` against FOCUS `version`."""
    site = focus_validator_site()
    python = site.parents[2] / "bin" / "python"  # <venv>/lib/pythonX.Y/site-packages
    done = subprocess.run(
        [str(python), "-m", "focus_validator.main", "--data-file", str(Path(path).resolve()),
         "--validate-version", version, "--block-download"],
        cwd=site, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    output = done.stdout + done.stderr
    summary = SUMMARY.search(output)
    if summary is None:
        tail = " | ".join(line for line in output.strip().splitlines()[-3:])
        raise ToolUnavailable(f"focus-validator printed no summary (exit {done.returncode}): "
                              f"{tail}")
    total, passed, failed, skipped = map(int, summary.groups())
    failures = {m.group(1): m.group(2) for m in FAILED.finditer(output)}
    return ValidatorReport(total, passed, failed, skipped, failures, output)
