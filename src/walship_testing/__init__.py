"""walship's embedded cluster and test harness, beside the library as ``kazoo.testing`` sits
beside kazoo: the shipping library (:mod:`walship`) never imports them; the ``walship
minicluster`` commands, the demo, the tests and the benchmarks do.

- :mod:`walship_testing.minicluster`: the embedded HBase-compatible cluster (region servers,
  WALs, replication queues, Thrift servers, a master), the fast default of the demo and tests;
- :mod:`walship_testing.harness`: real HBase 2.6 (and HDFS, YARN, a KDC) started from the
  Java launcher under ``harness/``.
"""
