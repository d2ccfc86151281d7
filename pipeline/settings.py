"""All settings in one place.

Environment variables use the prefix ``PAPERKB_`` (``PAPERKB_WAREHOUSE``, ``PAPERKB_ARXIV_OAI_URL``...);
``S2_API_KEY`` is read without prefix as Semantic Scholar users expect. CLI flags override both.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = REPO_ROOT / "sql"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAPERKB_", extra="ignore")

    # --- data root ---------------------------------------------------------------------------
    warehouse: Path = Field(default=Path("warehouse"), description="data root (raw zone, DuckDB, LanceDB, snapshots)")

    # --- services (settings so tests and mirrors can point elsewhere) -------------------------
    arxiv_oai_url: str = "https://oaipmh.arxiv.org/oai"
    arxiv_api_url: str = "https://export.arxiv.org/api/query"
    arxiv_pdf_url: str = "https://arxiv.org/pdf"
    s2_api_url: str = "https://api.semanticscholar.org/graph/v1"
    s2_api_key: str | None = Field(default=None, validation_alias=AliasChoices("S2_API_KEY", "PAPERKB_S2_API_KEY"))

    # --- politeness and retries ---------------------------------------------------------------
    categories: list[str] = Field(default_factory=lambda: ["cs.AI"], description="arXiv categories to keep")
    oai_set: str = "cs"
    oai_metadata_prefix: str = "arXivRaw"
    arxiv_delay_s: float = 3.0
    s2_delay_s: float = 1.0
    http_timeout_s: float = 60.0
    retry_max_attempts: int = 5
    retry_max_backoff_s: float = 120.0
    max_consecutive_failures: int = 5
    user_agent: str = "paperkb/0.1 (+https://github.com/paperkb/paperkb)"

    # --- harvest (issue 2) --------------------------------------------------------------------

    # --- enrich (issue 3) ---------------------------------------------------------------------

    # --- fulltext (issue 4) -------------------------------------------------------------------

    # --- graph (issue 5) ----------------------------------------------------------------------

    # --- embed / publish (issue 6) ------------------------------------------------------------

    # --- query (issue 7) ----------------------------------------------------------------------

    # --- serve (issue 9) ----------------------------------------------------------------------

    # --- derived paths ------------------------------------------------------------------------
    @property
    def raw_dir(self) -> Path:
        return self.warehouse / "raw"

    @property
    def db_path(self) -> Path:
        return self.warehouse / "warehouse.duckdb"

    @property
    def staging_dir(self) -> Path:
        return self.warehouse / "staging"

    @property
    def snapshots_dir(self) -> Path:
        return self.warehouse / "snapshots"

    @property
    def lancedb_dir(self) -> Path:
        return self.warehouse / "lancedb"

    @classmethod
    def load(cls, **overrides) -> "Settings":
        """Environment first, then explicit overrides (CLI flags); ``None`` overrides are ignored."""
        return cls(**{k: v for k, v in overrides.items() if v is not None})
