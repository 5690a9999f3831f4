"""The model bundle, owned here: its layout, typed manifest, writing, reading and publishing.

Training writes bundles, serving and the CLI read and publish them, all through this package
(see docs/architecture.md, Bundle); nobody else spells a bundle file name or a manifest key.
"""

from model.bundle.layout import check_version_name, current_path, new_version_name
from model.bundle.manifest import (
    ABS_DOT,
    DOT,
    FORMAT_VERSION,
    BundleError,
    Manifest,
    RetrainOrigin,
    read_manifest,
)
from model.bundle.publish import (
    broken_reason,
    current_version,
    describe,
    keep_out,
    kept_out_reason,
    list_versions,
    publish,
    resolve_bundle,
    rollback,
)
from model.bundle.read import ModelBundle, load_query_tower
from model.bundle.write import remove_path, stale_temps, write_bundle

__all__ = [
    "ABS_DOT",
    "DOT",
    "FORMAT_VERSION",
    "BundleError",
    "Manifest",
    "ModelBundle",
    "RetrainOrigin",
    "broken_reason",
    "check_version_name",
    "current_path",
    "current_version",
    "describe",
    "keep_out",
    "kept_out_reason",
    "list_versions",
    "load_query_tower",
    "new_version_name",
    "publish",
    "read_manifest",
    "remove_path",
    "resolve_bundle",
    "rollback",
    "stale_temps",
    "write_bundle",
]
