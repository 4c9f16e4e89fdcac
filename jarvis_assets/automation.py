"""When a layer runs without being asked: declarative automation shared by the layers.

Ingestion is started by the change sensors and the schedules; every layer below follows
its upstream layer as soon as that changed, but never on data an upstream blocking check
rejected, so bad chunks or vectors stop where they were found.

The checks are asked "did any blocking check of an upstream fail" rather than Dagster's
``all_deps_blocking_checks_passed``: the text layer depends on the raw asset of every kind,
each partitioned by its own kind's sources, and a source has no partition in the other
kinds' raw assets, which "all deps" would count against it.
"""

import dagster as dg

_BLOCKING_CHECK_FAILED = dg.AutomationCondition.any_checks_match(
    dg.AutomationCondition.check_failed(), blocking_only=True)

follows_upstream = (dg.AutomationCondition.eager()
                    & ~dg.AutomationCondition.any_deps_match(_BLOCKING_CHECK_FAILED)
                    ).with_label("follows upstream unless a blocking check of it failed")
