"""Prometheus metrics of the service: requests, latency, served and published model, reloads.

Each app gets its own registry, so several apps in one process (tests) never clash.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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
        self.model = _ModelCollector()
        self.registry.register(self.model)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request."""
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def render(self, service: ModelService) -> bytes:
        """The text exposition, with the model families read from `service` as it is now."""
        self.model.service = service
        return generate_latest(self.registry)


class _ModelCollector(Collector):
    """The served model's families, read from the service at each scrape."""

    def __init__(self) -> None:
        self.service: ModelService | None = None

    def describe(self) -> list[Metric]:
        """No families before the first scrape binds a service (keeps registration cheap)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Loaded flag, served and published versions, index size, reload failures."""
        if self.service is None:
            return
        current, state = self.service.current, self.service.status()
        yield GaugeMetricFamily(
            "recsys_model_loaded", "1 when a model is loaded.", value=bool(current)
        )
        served = GaugeMetricFamily(
            "recsys_model_info", "1 for the served model version.", labels=["version"]
        )
        published = GaugeMetricFamily(
            "recsys_published_model_info",
            "1 for the version models/CURRENT names (not the served one after a failed reload).",
            labels=["version"],
        )
        items = GaugeMetricFamily(
            "recsys_index_items", "Items in the served index.", labels=["kind"]
        )
        if current is not None:
            served.add_metric([current.version], 1)
            items.add_metric([current.index.kind], current.index.size)
        if state.published is not None:
            published.add_metric([state.published], 1)
        yield from (served, published, items)
        yield CounterMetricFamily(
            "recsys_model_reload_failures", "Failed model reloads.", value=state.failed_reloads
        )
        yield GaugeMetricFamily(
            "recsys_model_last_reload_error_timestamp_seconds",
            "Unix time of the last failed reload (0: none since the last success).",
            value=state.last_error_at if state.last_error else 0,
        )
