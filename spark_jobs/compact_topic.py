"""The spark-submit application of a checkout, over the one the package ships (the DAG's compact
task submits that one, `lakecleaner paths` prints where):

    spark-submit spark_jobs/compact_topic.py --config config/lakecleaner.yaml --topic orders [--partitions 0,2]

Thin on purpose: the arguments and the run are lakecleaner.spark_jobs.compact_topic's. This folder
holds nothing else, since spark-submit puts it first on the driver's sys.path.
"""

from lakecleaner.process import exit_flushed
from lakecleaner.spark_jobs.compact_topic import main

if __name__ == "__main__":
    exit_flushed(main())
