"""Asset checks: the guarantees later layers rely on, checked on the stored tables and
stores. Per-source checks are partitioned like their assets and judge the run's source;
checks that later layers depend on block them."""
