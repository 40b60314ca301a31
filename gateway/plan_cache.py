"""The pull-plan cache: a repeated pull query by a new key is neither parsed nor planned. No I/O.

A request's statement is read for its literal-free shape (``sqlparse_ext.shape``: one regular
expression, no parse; bound ``parameters`` are put in their places first, as the parser would).
The first query of a shape runs through the parser and the planner as always; if it is a pull
query on a table, a template is then built from it (``engine.pull.template``). Later queries of
the shape are bound to their literal values on that template.

A template is used only while it matches: the same Source object in the catalog (a DROP, a
re-CREATE or a new column makes a new one, so exactly the plans of a changed table go stale), the
same custom types, the same ``ksql.query.pull.table.scan.enabled`` and ``range.scan.enabled``, the
same kept literals (LIMIT).
Per-request settings that are not part of a plan (lag bounds, read-your-writes tokens) are read
per request as on the uncached path. Anything a template cannot bind falls back to the uncached
path, which answers (or refuses) exactly as it would have.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.engine.pull.template import PullTemplate, build_template
from headwater.gateway.pull import PreparedPull
from headwater.gateway.pull_options import pull_options
from headwater.metastore.catalog import SourceKind
from headwater.sqlparse_ext import statements as ast
from headwater.sqlparse_ext.params import ParameterError, bind
from headwater.sqlparse_ext.shape import Shape, literal_shape

if TYPE_CHECKING:
    from headwater.gateway.ksql import KsqlRequest
    from headwater.gateway.services import Services

__all__ = ["Lookup", "PlanCache"]

CAPACITY = 2048
"""Shapes kept (least recently used first out)."""
PER_SHAPE = 4
"""Templates kept per shape (they differ in kept literals, catalog versions or settings)."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the cache knows about a request: the query prepared from a template, or the shape to
    learn once the uncached path has planned it (None when the request has no shape)."""

    prepared: PreparedPull | None
    shape: Shape | None = None
    text: str = ""


_NOTHING = Lookup(None)


class PlanCache:
    """Templates by shape, shared by the server's requests (thread-safe)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._shapes: OrderedDict[str, list[PullTemplate]] = OrderedDict()
        self._uncacheable: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def lookup(self, request: KsqlRequest, services: Services) -> Lookup:
        """The request's query prepared from a template, if one matches."""
        if request.ksql.lstrip()[:6].upper() != "SELECT":
            return _NOTHING
        text = request.ksql
        if "${" in text and request.substitutes():
            return _NOTHING  # the statement's own ${...}: only the parser substitutes them
        if request.parameters is not None:
            try:
                text = bind(text, request.parameters)
            except ParameterError:
                return _NOTHING  # the parser says why
        shape = literal_shape(text)
        if shape is None or shape.key in self._uncacheable:
            return _NOTHING
        templates = self._shapes.get(shape.key)
        if templates:
            catalog = services.runner.catalog
            for template in templates:
                source = catalog.sources.get(template.source.name)
                if source is None:
                    continue
                options = pull_options(
                    services.pull, request.streams_properties, dict(source.properties)
                )
                if not options.limit_clause_enabled:
                    break  # the uncached path refuses a LIMIT then: plan afresh
                if not template.matches(
                    shape.values,
                    source,
                    catalog.types,
                    options.table_scan_enabled,
                    options.range_scan_enabled,
                ):
                    continue
                try:
                    bound = template.bind(shape.values)
                except Exception:  # noqa: BLE001 - the uncached path answers this one
                    break
                self.hits += 1
                self._touch(shape.key)
                return Lookup(PreparedPull(text, source, bound.plan, options, bound))
        self.misses += 1
        return Lookup(None, shape, text)

    def learn(
        self, lookup: Lookup, statement: ast.Statement, prepared: PreparedPull, services: Services
    ) -> None:
        """Build the template of a shape the uncached path has just planned (``prepared``)."""
        shape = lookup.shape
        if shape is None or not isinstance(statement, ast.Select):
            return
        source = prepared.source
        if source.kind is not SourceKind.TABLE:
            self._refuse(shape.key)
            return
        types = services.runner.catalog.types
        scan = prepared.options.table_scan_enabled
        ranges = prepared.options.range_scan_enabled
        if any(
            t.matches(shape.values, source, types, scan, ranges)
            for t in self._shapes.get(shape.key, ())
        ):
            return  # one matches already: these values did not bind (planned afresh, as they must)
        try:
            template = build_template(
                statement, shape.starts, shape.values, source, types, scan, ranges
            )
        except Exception:  # noqa: BLE001 - a shape the templates do not cover: never cached
            self._refuse(shape.key)
            return
        with self._lock:
            kept = [t for t in self._shapes.get(shape.key, ()) if t.source is source]
            self._shapes[shape.key] = [template, *kept][:PER_SHAPE]
            self._shapes.move_to_end(shape.key)
            while len(self._shapes) > self._capacity:
                self._shapes.popitem(last=False)

    def stats(self) -> dict[str, Any]:
        """Counters for /status-style reporting and benchmarks."""
        return {
            "shapes": len(self._shapes),
            "hits": self.hits,
            "misses": self.misses,
            "uncacheable": len(self._uncacheable),
        }

    def _touch(self, key: str) -> None:
        with self._lock:
            if key in self._shapes:
                self._shapes.move_to_end(key)

    def _refuse(self, key: str) -> None:
        with self._lock:
            self._uncacheable[key] = None
            while len(self._uncacheable) > self._capacity:
                self._uncacheable.popitem(last=False)
