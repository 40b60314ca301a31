"""What tests (and the benchmarks and runners) share: a local schema registry, headwater nodes as
child processes, and the pure verdicts of the soaks. Imported as ``tests.support.<module>`` (pytest
runs from the repository root); pytest collects nothing here.
"""
