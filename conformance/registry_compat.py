"""Confluent's schema-compatibility cases, judged by the registry's rules for each schema kind.

Run ``python -m conformance.registry_compat`` from the repository. The cases are in
``conformance/registry_compat/{avro,protobuf,json}.json``, each a JSON list of
``{"description", "level", "previous": [texts, oldest first], "new": text, "compatible"}`` taken
from Confluent's own tests, with the texts a schema references when it does
(``"previous_references"``: one ``{name: text}`` per previous schema; ``"new_references"``), and
Confluent's ``changes`` where its test lists them (the kinds' own tests check those). A case passes when the kind's rules
(``headwater.registry.{avro,protobuf,json}_rules``) find ``new`` compatible at ``level`` exactly
when Confluent does, through `headwater.registry.compatibility.problems`: BACKWARD checks that
``new`` reads what the latest previous schema wrote, FORWARD the reverse, FULL both, a
``*_TRANSITIVE`` level every previous schema, NONE nothing. A case with an ``xfail_reason`` is
not run (it is counted as skipped and its reason shown). A kind whose file or rules module does
not exist yet is skipped, saying so.

Options: ``--kind AVRO|PROTOBUF|JSON`` (repeatable; all by default), ``-v`` (every failure and
xfail with its description and detail), ``--json PATH`` (every case's outcome, for comparing
runs). Prints each kind's counts, then ``N passed, N failed, N skipped``; exits 1 when a case
fails. Reads the case files; otherwise pure.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from headwater.registry import compatibility
from headwater.registry.errors import RegistryError
from headwater.registry.subject import Subject

#: Each kind's case file (in `CASES`) and rules module.
KINDS = {
    "AVRO": ("avro.json", "headwater.registry.avro_rules"),
    "PROTOBUF": ("protobuf.json", "headwater.registry.protobuf_rules"),
    "JSON": ("json.json", "headwater.registry.json_rules"),
}
CASES = Path(__file__).resolve().parent / "registry_compat"


@dataclass(frozen=True)
class Outcome:
    """One case's verdict: ``passed``, ``failed`` or ``skipped`` (marked xfail)."""

    kind: str
    description: str
    verdict: str
    detail: str = ""


@dataclass(frozen=True)
class KindRun:
    """What was run of one kind: its outcomes, or why it was not run (``missing``)."""

    kind: str
    outcomes: list[Outcome]
    missing: str = ""


def load_cases(kind: str, folder: Path = CASES) -> list[dict[str, Any]]:
    """The cases of ``kind`` (its file must exist)."""
    cases = json.loads((folder / KINDS[kind][0]).read_text())
    if not isinstance(cases, list):
        raise TypeError(f"{folder / KINDS[kind][0]}: a JSON list of cases expected")
    return cases


def judge(kind: str, case: Mapping[str, Any]) -> Outcome:
    """One case, run through the kind's rules at the case's level."""
    description = str(case.get("description", ""))
    if case.get("xfail_reason"):
        return Outcome(kind, description, "skipped", str(case["xfail_reason"]))
    referenced = case.get("previous_references") or [{}] * len(case["previous"])
    previous = [
        (number, Subject(kind, text, references))
        for number, (text, references) in enumerate(zip(case["previous"], referenced), 1)
    ]
    new = Subject(kind, case["new"], case.get("new_references") or {})
    try:
        found = compatibility.problems(case["level"], new, previous)
    except RegistryError as error:
        return Outcome(kind, description, "failed", f"{type(error).__name__}: {error.message}")
    if (not found) == bool(case["compatible"]):
        return Outcome(kind, description, "passed")
    if case["compatible"]:
        return Outcome(
            kind, description, "failed", "compatible expected, found: " + "; ".join(found)
        )
    return Outcome(kind, description, "failed", "incompatible expected, found compatible")


def run_kind(kind: str, folder: Path = CASES) -> KindRun:
    """Every case of ``kind``, or why there are none to run."""
    file, module = KINDS[kind]
    if not (folder / file).exists():
        return KindRun(kind, [], f"{folder.name}/{file} does not exist yet")
    cases = load_cases(kind, folder)
    if importlib.util.find_spec(module) is None:
        skipped = [Outcome(kind, str(c.get("description", "")), "skipped") for c in cases]
        return KindRun(kind, skipped, f"{module} does not exist yet")
    return KindRun(kind, [judge(kind, case) for case in cases])


def report(runs: list[KindRun], verbose: bool) -> str:
    """Each kind's counts (and with ``verbose`` its failures and xfails), then the totals."""
    lines = []
    for run in runs:
        counts = Counter(o.verdict for o in run.outcomes)
        if run.missing:
            skipped = f"{len(run.outcomes)} cases skipped" if run.outcomes else "not run"
            lines.append(f"{run.kind}: {run.missing}: {skipped}")
            continue
        lines.append(
            f"{run.kind}: {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['skipped']} marked xfail of {len(run.outcomes)}"
        )
        for outcome in run.outcomes:
            if outcome.verdict == "failed" and verbose:
                lines.append(f"  FAILED {outcome.description}: {outcome.detail}")
            elif outcome.verdict == "skipped" and verbose:
                lines.append(f"  XFAIL {outcome.description}: {outcome.detail}")
    totals = Counter(o.verdict for run in runs for o in run.outcomes)
    lines.append(
        f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.registry_compat", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--kind", action="append", choices=sorted(KINDS), help="a schema kind")
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    args = parser.parse_args(argv)
    runs = [run_kind(kind) for kind in (args.kind or list(KINDS))]
    print(report(runs, args.verbose))
    if args.json:
        body = [asdict(outcome) for run in runs for outcome in run.outcomes]
        args.json.write_text(json.dumps(body, indent=1))
    return 1 if any(o.verdict == "failed" for run in runs for o in run.outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
