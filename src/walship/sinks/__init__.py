"""Where shipped edits go: HBase peers over Thrift, dead letters."""
