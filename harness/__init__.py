"""Real processes for the tests and the benchmarks: a private redis-server, Celery workers, gunicorn
(processes.py); a whole platform deployed one of the documented ways on a private PostgreSQL
(platforms.py); the faults of the operator's table with traffic across them (fault_rows.py); a hung
broker under API load (broker_pause.py)."""
