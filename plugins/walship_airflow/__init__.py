"""walship's Airflow provider (``pip install walship``; ``get_provider_info``), laid out as
Airflow's providers are: ``hooks/`` (the ``walship`` connection, Spark submission),
``operators/``, ``sensors/``, ``triggers/``, ``notifications/``, ``plugins/`` (the
"Replication" page), and ``dags/``, the factory of the walship DAGs for each source
(:mod:`.sources`) that the repository's ``dags/`` files call.

Everything here is thin: the work is done by the ``walship`` library, which never imports
Airflow.
"""
