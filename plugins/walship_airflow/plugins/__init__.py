"""The provider's Airflow plugin, :mod:`.replication`: the "Replication" page
(:mod:`.app` serves it, :mod:`.page` draws it)."""
