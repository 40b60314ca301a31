"""Gauge and counter families as the server's state collector fills them, and their text. Pure.

prometheus-client's families keep each sample as a ``Sample`` with a dict of labels, and its
``generate_latest`` checks every name and sorts every sample's labels as it writes: 80% of a
scrape with 100 queries (~2,700 series) went there (``bench.metrics_scrape``). A :class:`Family`
keeps a sample as a tuple of label values in the family's label order; :func:`text_lines` writes
the families in Prometheus' text format 0.0.4, byte for byte what ``generate_latest`` writes for
the same families (``tests/gateway/test_metrics.py`` compares them, hostile label values included),
and :meth:`Family.metric` gives prometheus-client's family for everything else (OpenMetrics).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString as _go_float

Kind = Literal["gauge", "counter"]
_LABEL_VALUE = str.maketrans({"\\": "\\\\", "\n": "\\n", '"': '\\"'})


@dataclass(slots=True)
class Family:
    """One metric family: its name (a counter's without ``_total``), help, kind, label names,
    and samples (label values in that order, value)."""

    name: str
    documentation: str
    kind: Kind = "gauge"
    labels: tuple[str, ...] = ()
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)

    def add(self, labels: tuple[str, ...], value: float) -> None:
        self.samples.append((labels, float(value)))

    def metric(self) -> Metric:
        """The same family as prometheus-client's (for OpenMetrics, and for the tests)."""
        made: GaugeMetricFamily | CounterMetricFamily
        if self.kind == "counter":
            made = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        else:
            made = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        for values, value in self.samples:
            made.add_metric(values, value)
        return made


def gauge(name: str, documentation: str, labels: tuple[str, ...] = ()) -> Family:
    return Family(name, documentation, "gauge", labels)


def counter(name: str, documentation: str, labels: tuple[str, ...] = ()) -> Family:
    return Family(name, documentation, "counter", labels)


def single(name: str, documentation: str, value: float) -> Family:
    """A gauge of one unlabelled sample."""
    family = gauge(name, documentation)
    family.add((), value)
    return family


def go_float(value: float) -> str:
    """Go's spelling of a float, as Prometheus writes it (``+Inf``, ``1e+06``): Python's repr
    where the two agree (every finite value under a million, and negative ones)."""
    if math.isfinite(value):
        spelled = repr(value)
        if value <= 0 or spelled.find(".") <= 6:
            return spelled
    return str(_go_float(value))  # type: ignore[no-untyped-call]


def text_lines(families: Iterable[Family]) -> str:
    """``families`` in Prometheus' text format 0.0.4, as ``generate_latest`` writes them (label
    names sorted, values escaped, Go's float spelling). Names must be valid Prometheus names, as
    every name the server gives is."""
    out: list[str] = []
    # label sets repeat across families (a query's id labels ~10 of them): each is written once
    written: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
    for family in families:
        name = family.name + "_total" if family.kind == "counter" else family.name
        doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {family.kind}\n")
        keys = family.labels
        if not keys:
            out.extend(f"{name} {go_float(value)}\n" for _values, value in family.samples)
            continue
        order = sorted(range(len(keys)), key=keys.__getitem__)
        for values, value in family.samples:
            labels = written.get((keys, values))
            if labels is None:
                labels = written[(keys, values)] = ",".join(
                    f'{keys[i]}="{values[i].translate(_LABEL_VALUE)}"' for i in order
                )
            out.append(f"{name}{{{labels}}} {go_float(value)}\n")
    return "".join(out)
