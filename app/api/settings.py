"""Server settings from the environment (prefix RECSYS_), with pydantic-settings."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from data.workspace import Workspace
from serving.index_kinds import IndexParams


class Settings(BaseSettings):
    """Everything the service reads from `RECSYS_*` environment variables.

    Example: `RECSYS_PORT=9000 RECSYS_INDEX=hnsw RECSYS_HNSW_EF_SEARCH=128 recsys serve`.
    """

    # an empty variable is an unset one, as for the CLI (RECSYS_HOME= is ./workspace, not .)
    model_config = SettingsConfigDict(env_prefix="RECSYS_", extra="ignore", env_ignore_empty=True)

    home: Path | None = Field(None, description="Workspace; default ./workspace.")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    admin_token: str | None = Field(
        None, description="Bearer token of /admin/* and POST /events; unset = both off."
    )
    index: Literal["auto", "flat", "hnsw", "ivf", "ivfpq"] = "auto"
    hnsw_m: int = Field(32, ge=2)
    hnsw_ef_construction: int = Field(80, ge=1)
    hnsw_ef_search: int = Field(64, ge=1)
    ivf_nlist: int = Field(0, ge=0, description="0 = about 4 * sqrt(n).")
    ivf_nprobe: int = Field(16, ge=1, description="IVF and IVF-PQ cells searched a query.")
    pq_m: int = Field(0, ge=0, description="IVF-PQ sub-quantizers (0 = largest divisor <= d/4).")
    pq_bits: int = Field(8, ge=1, le=16, description="IVF-PQ bits a sub-quantizer code.")
    reload_interval: float = Field(5.0, ge=0, description="Seconds between CURRENT polls; 0 off.")
    cors_origins: list[str] = Field(default_factory=list)
    max_body_bytes: int = Field(1_000_000, ge=1)
    max_batch: int = Field(256, ge=1, description="Most queries answered in one model pass.")
    threads: int = Field(
        1,
        ge=1,
        description="CPU threads of the query tower and faiss (one OpenMP runtime, one cap), "
        "on the model thread and for index builds.",
    )
    access_log: bool = True

    def workspace(self) -> Workspace:
        """The workspace these settings name."""
        return Workspace.resolve(self.home)

    def index_params(self) -> IndexParams:
        """Index kind and parameters."""
        return IndexParams(
            kind=self.index,
            hnsw_m=self.hnsw_m,
            hnsw_ef_construction=self.hnsw_ef_construction,
            hnsw_ef_search=self.hnsw_ef_search,
            ivf_nlist=self.ivf_nlist,
            ivf_nprobe=self.ivf_nprobe,
            pq_m=self.pq_m,
            pq_bits=self.pq_bits,
        )
