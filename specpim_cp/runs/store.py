"""The result store of a batch or grid folder: `results.jsonl`, append-only and resumable.

Every finished instance appends its records in one write, flushed and fsynced: one record per result
(one per baseline, one per ladder step), each carrying the instance key, its `part` name, the
instance's record count `parts` and the id of the write (`attempt`). Only a key's latest attempt
counts; it is done when all its parts are there and none is an ERROR, so a re-run skips what is done,
retries what failed or was cut off, and a killed run loses nothing that had finished. `results.csv`
and `pareto/*.csv` are regenerated from the JSONL (one row per record); the report adds the per-scenario
`comparisons.csv` (`report/comparisons.py`), which needs records grouped by scenario.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.files import path_in, write_atomic
from specpim_cp.runs.instances import METHOD_ORDER
from specpim_cp.runs.records import PimAllocation, Record

NOT_DONE = ("ERROR", "TIME_LIMIT")  # statuses that a re-run retries (a crash, a deadline before any design)
RESULTS_JSONL = "results.jsonl"
RESULTS_CSV = "results.csv"
PARETO_DIR = "pareto"
METRIC_KEYS = ("latency_ns_per_token", "energy_pj_per_token", "throughput_tokens_per_s", "tokens_per_round",
               "round_time_ns", "edp", "ttft_ns", "prefill_energy_nj_per_request", "request_latency_ns")


class ResultStore:
    """Append-only JSONL of records; a torn last line (a killed writer) is cut off when opened for
    writing (`repair`; a reader ignores it), and a line that is not a record is skipped (its instance is
    not done and runs again)."""

    def __init__(self, path: Path, repair: bool = True):
        self.path = path
        self._records: list[Record] = []
        self.unreadable = 0
        if path.exists():
            if repair:
                self._repair()
            for line in path.read_text(errors="replace").splitlines():
                if line.strip():
                    try:
                        self._records.append(Record.from_json(json.loads(line)))
                    except ValueError:  # json.JSONDecodeError is a ValueError
                        self.unreadable += 1

    def _repair(self) -> None:
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)

    def records(self) -> list[Record]:
        return latest_records(self._records)

    def by_key(self) -> dict[str, list[Record]]:
        out: dict[str, list[Record]] = {}
        for r in self.records():
            out.setdefault(r.key, []).append(r)
        return out

    def done_keys(self) -> set[str]:
        return {k for k, recs in self.by_key().items() if is_done(recs)}

    def append(self, records: Iterable[Record]) -> None:
        """Append one instance's records in one write, flushed and fsynced, under a fresh attempt id."""
        attempt = f"{time.time_ns():x}-{os.getpid()}"
        records = [r.with_(attempt=attempt) for r in records]
        text = "".join(json.dumps(r.to_json(), sort_keys=True) + "\n" for r in records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        self._records.extend(records)


def latest_records(records: Iterable[Record]) -> list[Record]:
    """The records of every key's latest attempt (one append), in first-seen order."""
    records = list(records)
    last_attempt = {r.key: r.attempt for r in records}
    latest: dict[tuple[str, str], Record] = {}
    for r in records:
        if r.attempt == last_attempt[r.key]:
            latest[(r.key, r.part)] = r
    return list(latest.values())


def is_done(records: list[Record]) -> bool:
    """All parts of the instance's latest attempt are present and none is an ERROR."""
    if not records:
        return False
    return len({r.part for r in records}) >= records[0].parts and all(r.status not in NOT_DONE for r in records)


def read_records(out: Path) -> list[Record]:
    """The current records of a batch or grid directory (latest per key and part); read only."""
    out = Path(out)
    if not out.is_dir():
        raise ScenarioError(f"{out}: no such directory")
    path = out / RESULTS_JSONL
    if not path.is_file():
        raise ScenarioError(f"{path}: no results (run `specpim-cp batch` or `specpim-cp grid` first)")
    store = ResultStore(path, repair=False)
    if not store.records():
        what = f"{store.unreadable} unreadable lines" if store.unreadable else "the file is empty"
        raise ScenarioError(f"{path}: no readable result records ({what})")
    return store.records()


# ------------------------------------------------------------------------------------------------
# CSV and Pareto files
# ------------------------------------------------------------------------------------------------
CSV_COLUMNS = ("scenario", "family", "batch_size", "host", "prompt_tokens", "generated_tokens", "method", "part", "status", "objective_name", "objective",
               "bound", "gap", "wall_s", *METRIC_KEYS, "draft_lengths", "pipeline", "pim_allocation",
               "seed", "solver_version", "inputs_hash", "key", "error",
               "step_failed", "step_error")


def pim_summary(pim: Sequence[PimAllocation]) -> str:
    return " ".join(f"{p.model}:{p.memory_type}:{p.pim_units}/{p.units_per_group}" for p in pim)


def _draft_lengths(design: dict) -> str:
    return " ".join(str(x["draft_length"]) for x in design["drafters"])


def _csv_row(r: Record) -> dict:
    data = r.to_json()
    row = {c: data.get(c) for c in CSV_COLUMNS}
    for k in METRIC_KEYS:
        row[k] = None if r.metrics is None else getattr(r.metrics, k)
    if r.design:
        row["draft_lengths"] = _draft_lengths(r.design)
        row["pipeline"] = r.design["pipeline"]
    row["pim_allocation"] = pim_summary(r.pim or ())
    return row


def sort_key(r: Record) -> tuple:
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    return (r.family, r.scenario, order.get(r.method, 99))


def records_csv(records: Sequence[Record]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in sorted(records, key=sort_key):  # stable: parts keep their JSONL order
        w.writerow(_csv_row(r))
    return buf.getvalue()


def pareto_csv(record: Record) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["latency_ns_per_token", "energy_pj_per_token", "throughput_tokens_per_s", "tokens_per_round",
                "draft_lengths", "pipeline", "pim_allocation"])
    for p in record.front or ():
        m = p.metrics
        w.writerow([m.latency_ns_per_token, m.energy_pj_per_token, m.throughput_tokens_per_s, m.tokens_per_round,
                    _draft_lengths(p.design), p.design["pipeline"], pim_summary(p.pim)])
    return buf.getvalue()


def write_derived_files(out: Path, records: Sequence[Record] | None = None) -> list[Path]:
    """Regenerate `results.csv` and `pareto/*.csv` from the JSONL records."""
    out = Path(out)
    records = read_records(out) if records is None else records
    written = [out / RESULTS_CSV]
    write_atomic(out / RESULTS_CSV, records_csv(records))
    for r in records:
        if r.method == "pareto" and r.front:
            path = path_in(out / PARETO_DIR, r.scenario, ".csv")
            write_atomic(path, pareto_csv(r))
            written.append(path)
    return written
