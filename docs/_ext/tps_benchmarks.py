"""``{benchmark-family}``: one family of the performance table, rendered with a plot of its data.

The directive's content is the family's Markdown table (the source of the numbers); the
plot is drawn from that table with matplotlib at every build, so the page's numbers and its
plots cannot disagree.

Options:
  ``:plot: ratio`` (default) plots the numbers that open the column named by ``:column:``
  (``0.988 (0.96–1.07; …)`` -> 0.988; ``1.004 / 0.985 / 0.983`` -> three bars), with a line
  at 1 and the ``target`` column's bound (``≤ 1.10``) as a marker.
  ``:plot: ours-vs-baseline`` plots the ``ours`` and ``baseline`` columns side by side,
  converting ``µs`` / ``ms`` / ``s`` to milliseconds (``:log:`` for a log scale).
  ``:unit:`` names the axis.
"""

from __future__ import annotations

import pathlib
import re

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

_NUMBER = r"[+\-−]?\d+(?:[.,]\d+)*"
_SEQUENCE = re.compile(rf"({_NUMBER})(?:\s*(?:µs|ms|s|M rec/s|M ex/s)?)(?:\s*/\s*({_NUMBER}(?:\s*/\s*{_NUMBER})*))?")
_UNITS = {"µs": 1e-3, "ms": 1.0, "s": 1e3}


def _float(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def parse_table(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """The header cells and the rows' cells of a Markdown table."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.strip().startswith("|")]
    if len(rows) < 3:
        raise ValueError("a benchmark family needs a Markdown table with a header and at least one row")
    return rows[0], [r for r in rows[2:]]


def leading_numbers(cell: str) -> list[float]:
    """``"1.004 / 0.985 / 0.983"`` -> the three; ``"median ratios 0.998 / 1.022, paired …"`` -> the first group."""
    match = re.search(rf"{_NUMBER}(?:\s*/\s*{_NUMBER})*", cell)
    if not match:
        return []
    return [_float(x) for x in re.findall(_NUMBER, match.group(0))]


def timed_values(cell: str) -> list[float]:
    """``"5.6 / 40 / 167 ms"`` or ``"141 ms / 2.2 s / 35 s"`` -> milliseconds; plain counts stay as they are."""
    cell = cell.split(";")[0].split("(")[0]
    values: list[tuple[float, str | None]] = []
    for part in cell.split("/"):
        m = re.match(rf"\s*({_NUMBER})\s*(µs|ms|s\b)?", part)
        if not m:
            break
        values.append((_float(m.group(1)), m.group(2)))
    unit = None
    out: list[float] = []
    for value, u in reversed(values):  # a number without a unit takes the next one's ("5.6 / 40 ms")
        unit = u or unit
        out.append(value * _UNITS[unit] if unit else value)
    return list(reversed(out))


def target_bound(cell: str) -> float | None:
    m = re.match(rf"\s*[≤≥<>]=?\s*({_NUMBER})", cell)
    return _float(m.group(1)) if m else None


def _label(cell: str, width: int = 58) -> str:
    text = re.sub(r"[`*]", "", cell).replace("§", "").replace("‡", "").strip()
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def draw(path: pathlib.Path, title: str, header: list[str], rows: list[list[str]], kind: str, column: str,
         unit: str, log: bool) -> int:
    """Draws the family's plot into ``path``; returns the number of bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels: list[str] = []
    series: list[list[float]] = []
    targets: list[float | None] = []
    if kind == "ratio":
        col = header.index(column)
        tcol = header.index("target") if "target" in header else None
        for row in rows:
            values = leading_numbers(row[col])
            for i, v in enumerate(values):
                labels.append(_label(row[0]) + (f" [{i + 1}/{len(values)}]" if len(values) > 1 else ""))
                series.append([v])
                targets.append(target_bound(row[tcol]) if tcol is not None else None)
        names = [column]
    else:
        ours, base = header.index("ours"), header.index("baseline")
        for row in rows:
            a, b = timed_values(row[ours]), timed_values(row[base])
            for i, (x, y) in enumerate(zip(a, b)):
                labels.append(_label(row[0]) + (f" [{i + 1}/{len(a)}]" if len(a) > 1 else ""))
                series.append([x, y])
                targets.append(None)
        names = ["ours", "baseline"]
    if not labels:
        raise ValueError(f"benchmark family {title!r}: no numbers found in column {column!r}")
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.42 * len(labels)))
    if kind == "ratio":  # dots: the differences from 1 are what matters, not the bars' length
        ax.scatter([s[0] for s in series], range(len(labels)), zorder=3, label=names[0])
        marked = [(i, t) for i, t in enumerate(targets) if t is not None]
        for n, (i, t) in enumerate(marked):
            ax.plot([t, t], [i - 0.35, i + 0.35], color="crimson", linewidth=2, label="target" if n == 0 else None)
        ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
        ax.grid(axis="x", alpha=0.3)
    else:
        height = 0.8 / len(names)
        for k, name in enumerate(names):
            ys = [i + (k - (len(names) - 1) / 2) * height for i in range(len(labels))]
            ax.barh(ys, [s[k] for s in series], height=height, label=name)
            for y, s in zip(ys, series):
                if s[k] == 0:  # an empty bar would read as "no data"
                    ax.annotate("0", (0, y), xycoords=("axes fraction", "data"), xytext=(3, 0),
                                textcoords="offset points", va="center", fontsize=7)
    if log:
        ax.set_xscale("log")
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=10)
    handles, legend = ax.get_legend_handles_labels()
    if len(set(legend)) > 1:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return len(labels)


class BenchmarkFamily(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = {
        "plot": lambda a: directives.choice(a, ("ratio", "ours-vs-baseline")),
        "column": directives.unchanged,
        "unit": directives.unchanged,
        "log": directives.flag,
    }

    def run(self) -> list[nodes.Node]:
        title = self.arguments[0]
        header, rows = parse_table(list(self.content))
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        out = pathlib.Path(self.env.srcdir) / "_generated" / f"perf-{slug}.png"
        kind = self.options.get("plot", "ratio")
        column = self.options.get("column", "paired ratio (IQR; range)")
        if kind == "ratio" and column not in header:
            raise self.error(f"benchmark family {title!r}: no column {column!r} in {header}")
        try:
            draw(out, title, header, rows, kind, column, self.options.get("unit", "ratio, ours / baseline"),
                 "log" in self.options)
        except ValueError as e:
            raise self.error(str(e)) from e
        self.env.note_dependency(__file__)
        container = nodes.container(classes=["benchmark-family"])
        image = nodes.image(uri=f"/_generated/{out.name}", alt=f"plot: {title}", classes=["benchmark-plot"])
        container += image
        self.state.nested_parse(self.content, self.content_offset, container)
        return [container]


def setup(app):  # noqa: ANN001, ANN201
    app.add_directive("benchmark-family", BenchmarkFamily)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
