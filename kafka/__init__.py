"""Kafka at the edge: the embedded broker and the one factory for every Kafka client."""
