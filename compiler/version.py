"""The version written into every PopEF file's Metadata `producer` field."""
VERSION = "0.1.0"
PRODUCER = f"tf-popef {VERSION}"
