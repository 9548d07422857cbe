"""HBase's Thrift interfaces, loaded from their IDL files with thriftpy2."""
