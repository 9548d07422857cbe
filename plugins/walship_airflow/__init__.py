"""Airflow glue for walship: the source-cluster hook, the queue trigger and sensor.

Everything here is thin: the work is done by the ``walship`` library, which never imports
Airflow. The trigger lives here (not in dags/) so that the triggerer can import it.
"""
