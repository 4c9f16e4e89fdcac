"""When a layer runs without being asked: declarative automation shared by the layers.

Ingestion is started by the change sensors and the schedules; every layer below follows
its upstream layer as soon as that changed, but never on data an upstream blocking check
rejected, so bad chunks or vectors stop where they were found.
"""

import dagster as dg

follows_upstream = (dg.AutomationCondition.eager()
                    & dg.AutomationCondition.all_deps_blocking_checks_passed()
                    ).with_label("follows upstream when its blocking checks passed")
