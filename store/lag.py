"""How far a local store partition is behind its changelog, in KIP-535's terms. Pure (no I/O).

`LagInfo` is what `all_local_store_partition_lags()` reports per table partition, and what each server
posts to its peers (`POST /lag`). The end offset used is the largest any server has seen for that
partition (docs/architecture.md, "Lag reporting"); this module only does the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LagInfo:
    """A store partition's position and lag (Kafka Streams' `LagInfo`, KIP-535 names).

    Attributes:
        current_offset_position: The next changelog offset the store will read (0 when nothing has
            been applied yet).
        end_offset_position: The changelog's end offset (the offset the next record will get).
        offset_lag: Records the store is behind: end - current, never below 0.
        last_record_ms: The newest record timestamp the store has applied (None: unknown), from
            which peers work out how stale it is in time (``max.staleness.ms``).
    """

    current_offset_position: int
    end_offset_position: int
    offset_lag: int
    last_record_ms: int | None = field(default=None, compare=False)  # metadata, not the lag

    def __post_init__(self) -> None:
        if self.current_offset_position < 0 or self.end_offset_position < 0:
            raise ValueError(f"offsets must be >= 0: {self}")
        if self.offset_lag < 0:
            raise ValueError(f"offset_lag must be >= 0: {self}")

    @classmethod
    def of(
        cls, position: int | None, end_offset: int, last_record_ms: int | None = None
    ) -> LagInfo:
        """Builds the lag of a store at `position` against a changelog ending at `end_offset`.

        The lag is clamped at 0: a store can be ahead of the end offset it is compared with when that
        end offset was observed earlier, or on another server, than the store's position.

        Args:
            position: The store's position (`PartitionStore.position()`); None counts as 0.
            end_offset: The changelog partition's end offset.
            last_record_ms: The newest record timestamp applied, if known.

        Returns:
            The LagInfo.

        Raises:
            ValueError: If an offset is negative.
        """
        current = 0 if position is None else position
        return cls(current, end_offset, max(0, end_offset - current), last_record_ms)
