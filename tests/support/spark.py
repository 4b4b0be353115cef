"""The Spark settings of the tests' sessions."""

#: What the tests' classic Spark sessions and the tests' Spark Connect server run with.
TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
}
