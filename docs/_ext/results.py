"""Tables of the evidence pages read from the results files the benchmarks write (``--json``).

``{results-table} ../../benchmarks/results/panel.json`` with ``:table: panel`` renders the
table of that file, with the command, the machine and the date it was made on, so that no
number on the page is copied by hand. A new table is one builder in :data:`TABLES`.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from table_nodes import table

NAMES = ("RegionsCV()", "GenLinCFA(neighbors=1)")


def _pair(median: float, worst: float, fmt: str) -> str:
    """``median (worst)``; "-" for an estimator that does not report it (NaN)."""
    if median != median:  # NaN
        return "-"
    return f"{median:{fmt}} ({worst:{fmt}})"


def _goal(ok: bool, text: str) -> str:
    return f"{text} ({'met' if ok else 'missed'})"


def panel_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """The panel's summary: the recommended call against the former one, with the goals."""
    res = record["results"]
    names = [n for n in NAMES if n in res]
    reg = [res[n]["summary"]["regions"] for n in names]
    smo = [res[n]["summary"]["smooth"] for n in names]
    goals, smooth_goals = reg[0]["goals"], smo[0]["goals"]

    def pure(r: dict) -> str:
        share = r["all_pure_share"]
        return f"{round(share * r['draws'])} of {r['draws']} ({100 * share:.0f} %)"

    def worst_groups(r: dict) -> str:
        w = r["groups_worst"]
        return f"{r['groups_median']:.0f} ({w['2 degree']} / {w['1 degree']})"

    rows = [
        ["regions: groups, median (worst at 2° / 1°)", *map(worst_groups, reg),
         _goal(goals["groups"], "<= 30 at 2°, <= 60 at 1°")],
        ["regions: draws with all 4 driving regions pure", *map(pure, reg),
         _goal(goals["pure"], ">= 90 %")],
        ["regions: R2 / oracle, median (worst)",
         *(f"{r['ratio_median']:.3f} ({r['ratio_worst']:.3f})" for r in reg),
         _goal(goals["ratio_median"] and goals["ratio_worst"], ">= 0.95 (>= 0.90)")],
        ["regions: contiguous groups, worst share",
         *(f"{r['contiguous_worst']:.2f}" for r in reg), _goal(goals["contiguous"], "1.00")],
        ["regions: fold-to-fold ARI of the map, median (worst)",
         *(_pair(r["ari_median"], r["ari_worst"], ".2f") for r in reg), ""],
        ["smooth: groups, median (worst)",
         *(f"{s['groups_median']:.0f} ({s['groups_worst']})" for s in smo),
         _goal(smooth_goals["groups"], "<= 30")],
        ["smooth: R2 minus ridge on all cells, median (worst)",
         *(f"{s['gap_median']:+.3f} ({s['gap_worst']:+.3f})" for s in smo),
         _goal(smooth_goals["within_ridge"], ">= -0.02")],
        ["regions: fit time, median (worst)",
         *(f"{r['fit_s_median']:.1f} s ({r['fit_s_worst']:.1f} s)" for r in reg), ""],
    ]  # fmt: skip
    if "time_ratio" in res:
        t = res["time_ratio"]
        rows.append(["fit time against GenLinCFA on the same draw, median (worst)",
                     f"{t['median']:.2f}x ({t['worst']:.2f}x)", "1", "<= 3x"])  # fmt: skip
    return [f"panel seed {record['panel_seed']}", *names, "goal"], rows


#: The tables by name: a builder from the results file's record to (header, rows).
TABLES = {"panel": panel_table}


class ResultsTable(Directive):
    required_arguments = 1
    option_spec = {"table": directives.unchanged_required}

    def run(self):
        env = self.state.document.settings.env
        source = (Path(env.srcdir) / Path(env.docname).parent / self.arguments[0]).resolve()
        env.note_dependency(str(source))
        record = json.loads(source.read_text())
        header, rows = TABLES[self.options["table"]](record)
        made = nodes.paragraph()
        made += nodes.Text("From ")
        made += nodes.literal(text=str(source.relative_to(Path(env.srcdir).resolve().parent)))
        made += nodes.Text(", written by ")
        made += nodes.literal(text=record["command"])
        made += nodes.Text(f" on {record['machine']}, {record['date']} (dcfa {record['dcfa']}).")
        return [table(header, rows), made]


def setup(app):
    app.add_directive("results-table", ResultsTable)
    return {"parallel_read_safe": True, "version": "1"}
