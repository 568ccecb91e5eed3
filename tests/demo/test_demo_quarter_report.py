"""`cost-pipeline demo` prints the quarter's period report path first, then one line per lever
over the quarter (ranked, its dollars summed and per month) and that they overlap, then the
bill as lines."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from cost_pipeline.demo.run import materialize_and_print


def test_demo_prints_the_quarter_report_first(demo_quarter, demo_warehouse, capsys):
    config, _ = demo_quarter
    summed = dict(demo_warehouse.execute(
        "SELECT lever, round(sum(dollars), 2) FROM cost_levers GROUP BY lever").fetchall())
    demo_warehouse.close()  # the demo re-materializes the quarter (unchanged months skip)
    assert materialize_and_print(Path(config)) == 0
    out = capsys.readouterr().out.splitlines()
    path = Path(out[0])
    assert path.name == "cost-report-2026-07_2026-09.html" and path.is_absolute()
    assert path.stat().st_size > 10_000
    assert out[1] == "levers over the quarter 2026-07 … 2026-09, ranked:"
    lines = out[2:2 + len(summed)]
    shown = []
    for rank, line in enumerate(lines, start=1):
        match = re.fullmatch(r"  (\d+)\. (.+?) +(−?)\$([\d,]+\.\d\d)  \(Jul .*, Aug .*, Sep .*\)",
                             line)
        assert match, line
        assert int(match[1]) == rank
        shown.append((match[2], Decimal(match[3].replace("−", "-") + match[4].replace(",", ""))))
    assert dict(shown) == {k: Decimal(str(v)).quantize(Decimal("0.01")) for k, v in summed.items()}
    assert shown[-1][0] == "use a cheaper card"
    dollars = [d for _, d in shown[:-1]]
    assert dollars == sorted(dollars, reverse=True)
    bound = [i for i, (lever, d) in enumerate(shown) if lever == "bound the search"]
    assert bound[0] <= 1 and shown[bound[0]][1] > 0  # the lesson: first or second, in dollars
    # once after the list: the levers overlap (a run can pull several), so no sum of them
    assert out[2 + len(summed)] == ("Each lever is priced on its own: a run can pull several "
                                    "levers, so the figures overlap and are not to be added up.")
    assert out[3 + len(summed)] == "" and out[4 + len(summed)].startswith("The bill as lines")
