"""Prometheus metrics of the service: requests, latency, model version, index size.

Each app gets its own registry, so several apps in one process (tests) never clash.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from serving.service import ModelService

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class Metrics:
    """The service's metric families."""

    def __init__(self) -> None:
        """Create the families in a fresh registry."""
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "recsys_http_requests",
            "HTTP requests by route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "recsys_http_request_duration_seconds",
            "HTTP request latency by route template and status.",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.model_info = Gauge(
            "recsys_model_info",
            "1 for the served model version.",
            ["version"],
            registry=self.registry,
        )
        self.index_items = Gauge(
            "recsys_index_items", "Items in the served index.", ["kind"], registry=self.registry
        )
        self.model_loaded = Gauge(
            "recsys_model_loaded", "1 when a model is loaded.", registry=self.registry
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request."""
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def render(self, service: ModelService) -> bytes:
        """The text exposition, with the model gauges refreshed from the service."""
        current = service.current
        self.model_info.clear()
        self.index_items.clear()
        self.model_loaded.set(1 if current else 0)
        if current is not None:
            self.model_info.labels(current.version).set(1)
            self.index_items.labels(current.index.kind).set(current.index.size)
        return generate_latest(self.registry)
