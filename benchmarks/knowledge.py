"""The knowledge index measured: build and rebuild cost, search latency, and retrieval of queries
people wrote in public (tests/data/knowledge_queries.json) against the shipped compendium.

    python benchmarks/knowledge.py [--compendium DIR] [--out benchmarks/results/knowledge]

Prints two tables: the index (first build in a fresh folder, taking the shipped vectors as a
user's first use does unless --embed-all, a second sync, search latency as the median of every
query) and retrieval per profiler (share of queries with an expected metric first,
and in the top five; mean reciprocal rank). Writes results.json and retrieval.png to --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pragma_core.knowledge import load_compendia
from pragma_core.knowledge.index import KnowledgeIndex
from pragma_core.knowledge.library import _default_metrics, packaged_vectors
from pragma_core.knowledge.ranking import ranked_search

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "tests" / "data" / "knowledge_queries.json"


def _rank(hits, expected: set[str]) -> int | None:
    for rank, hit in enumerate(hits, 1):
        if hit.kind == "metric" and set(hit.entry.names) & expected:
            return rank
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compendium", type=Path, default=None, help="a pragma-kb build's compendium folder")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "knowledge")
    parser.add_argument(
        "--embed-all",
        action="store_true",
        help="embed every entry in the first build instead of taking the shipped vectors (a user's first use)",
    )
    args = parser.parse_args()
    compendia = load_compendia(args.compendium)
    queries = json.loads(QUERIES.read_text())["queries"]
    console = Console()

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        index = KnowledgeIndex(Path(folder))
        first = index.sync(compendia.values(), known=None if args.embed_all else packaged_vectors())
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        second = KnowledgeIndex(Path(folder)).sync(compendia.values())
        second_s = time.perf_counter() - started
        ranks, latencies, defaults = [], [], _default_metrics()
        for query in queries:
            started = time.perf_counter()
            hits = ranked_search(
                index,
                [compendia[query["profiler"]]],
                query["query"],
                profiler=query["profiler"],
                kind="metric",
                k=5,
                defaults=defaults,
            )
            latencies.append(time.perf_counter() - started)
            ranks.append(_rank(hits, set(query["expected"])))

    table = Table(title="Knowledge index")
    columns = (
        "entries",
        "first build s",
        "embedded",
        "shipped vectors",
        "second sync s",
        "re-embedded",
        "search median ms",
    )
    for column in columns:
        table.add_column(column, justify="right")
    table.add_row(
        str(first.total),
        f"{first_s:.1f}",
        str(first.embedded),
        str(first.reused),
        f"{second_s:.1f}",
        str(second.embedded),
        f"{1000 * statistics.median(latencies):.0f}",
    )
    console.print(table)

    per_profiler: dict[str, list[int | None]] = {}
    for query, rank in zip(queries, ranks):
        per_profiler.setdefault(query["profiler"], []).append(rank)
    per_profiler["all"] = ranks
    retrieval = Table(
        title=f"Retrieval of {len(queries)} queries written outside the project (metrics only, filtered by profiler)"
    )
    for column in ("profiler", "queries", "first", "top five", "MRR"):
        retrieval.add_column(column, justify="right")
    summary = {}
    for name, found in per_profiler.items():
        top1 = sum(1 for r in found if r == 1) / len(found)
        top5 = sum(1 for r in found if r is not None) / len(found)
        mrr = sum(1 / r for r in found if r) / len(found)
        summary[name] = {"queries": len(found), "top1": top1, "top5": top5, "mrr": mrr}
        retrieval.add_row(name, str(len(found)), f"{top1:.0%}", f"{top5:.0%}", f"{mrr:.2f}")
    console.print(retrieval)
    misses = [q["query"][:90] for q, r in zip(queries, ranks) if r is None]
    if misses:
        console.print("not in the top five:", *(f"  - {m}" for m in misses), sep="\n")

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "index": {
                    "entries": first.total,
                    "first_build_s": first_s,
                    "embedded": first.embedded,
                    "second_sync_s": second_s,
                    "re_embedded": second.embedded,
                    "search_median_ms": 1000 * statistics.median(latencies),
                },
                "retrieval": summary,
                "ranks": [{"query": q["query"], "profiler": q["profiler"], "rank": r} for q, r in zip(queries, ranks)],
            },
            indent=1,
        )
        + "\n"
    )
    _plot(summary, args.out / "retrieval.png")
    console.print(f"wrote {args.out / 'results.json'} and {args.out / 'retrieval.png'}")


def _plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    positions = range(len(names))
    figure, axes = plt.subplots(figsize=(7, 3.5))
    axes.bar([p - 0.2 for p in positions], [100 * summary[n]["top1"] for n in names], width=0.4, label="first")
    axes.bar([p + 0.2 for p in positions], [100 * summary[n]["top5"] for n in names], width=0.4, label="top five")
    axes.set_xticks(list(positions), [f"{n}\n({summary[n]['queries']} queries)" for n in names])
    axes.set_ylabel("queries with an expected metric (%)")
    axes.set_ylim(0, 105)
    axes.set_title("pragma knowledge search on queries written outside the project")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
