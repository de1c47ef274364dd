"""Records and their formats: the paper's JSON record, records as columns, files (JSON, JSON Lines,
Parquet, Hugging Face folders), prompt rows, and ``gf2 generate``."""

from gf2env.records.columns import RecordColumns
from gf2env.records.files import read_record_columns, read_records
from gf2env.records.parquet import write_parquet
from gf2env.records.record import Record, generate_records, write_records

__all__ = [
    "Record",
    "RecordColumns",
    "generate_records",
    "read_record_columns",
    "read_records",
    "write_parquet",
    "write_records",
]
