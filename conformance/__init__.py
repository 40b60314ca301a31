"""ksqlDB conformance: its test corpus (../shared/ksql-corpus) run against headwater.

Tooling, like bench/: run from the repository as ``python -m conformance.qtt``,
``python -m conformance.rqtt`` and ``python -m conformance.parse_coverage``; not installed as
part of headwater. The ``*_ci_expected.txt`` lists name the cases that must keep passing.
"""
