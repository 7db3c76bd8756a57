"""Export reconstructed samples: veRL AgentLoopOutput rows (V1 list / classic), Parquet, JSONL."""

from openforgerl.export.images import ExportImageError, ImageMode, check_sample_images, pil_images
from openforgerl.export.pipeline import ExportFormat, export_rows, reconstruct_log, write_rows
from openforgerl.export.verl import AGENT_LOOP_FIELDS, agent_loop_output, classic_output, v1_outputs
from openforgerl.export.writers import read_jsonl_rows, read_parquet_rows, write_jsonl, write_parquet

__all__ = [
    "AGENT_LOOP_FIELDS",
    "ExportFormat",
    "ExportImageError",
    "ImageMode",
    "agent_loop_output",
    "check_sample_images",
    "classic_output",
    "export_rows",
    "pil_images",
    "read_jsonl_rows",
    "read_parquet_rows",
    "reconstruct_log",
    "v1_outputs",
    "write_jsonl",
    "write_parquet",
    "write_rows",
]
