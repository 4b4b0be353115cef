"""Configuration: Kafka's own config names, defaults and validation rules, and the YAML file.

- `topic_keys`: Kafka's topic-level keys and their broker-level defaults (`TopicConfig`);
- `settings`: the config file's model (`LakeConfig` and its sections) and its parsing;
- `files`: finding and loading the file (--config, $LAKECLEANER_CONFIG, ./lakecleaner.yaml);
- `environment`: the environment variables read; `values`: Kafka's value types, parsed.
"""

from lakecleaner.config.environment import (
    ENV_AWS_ACCESS_KEY,
    ENV_AWS_DEFAULT_REGION,
    ENV_AWS_REGION,
    ENV_AWS_SECRET_KEY,
    ENV_AWS_SESSION_TOKEN,
    ENV_CONFIG_PATH,
    ENV_DEDUPE_BUFFER_SIZE,
    ENV_LAKE_URI,
    ENV_MAX_CONCURRENCY,
    ENV_PROFILE_DIR,
    ENV_S3_ENDPOINT,
    ENV_SPARK_REMOTE,
    ENVIRONMENT_VARIABLES,
)
from lakecleaner.config.files import LOCAL_CONFIG, find_config, load_config, locate_config, sample_config_text
from lakecleaner.config.settings import (
    DAY_MS,
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_IO_BUFFER_LOAD_FACTOR,
    HOUR_MS,
    AirflowSettings,
    CleanerSettings,
    LakeConfig,
    SparkSettings,
    StorageSettings,
    TopicSpec,
    is_local_master,
    parse_config,
    spark_loopback_env,
)
from lakecleaner.config.topic_keys import TopicConfig
from lakecleaner.config.values import LONG_MAX, did_you_mean, shown

__all__ = [
    "DAY_MS",
    "DEFAULT_DEDUPE_BUFFER_SIZE",
    "DEFAULT_IO_BUFFER_LOAD_FACTOR",
    "ENVIRONMENT_VARIABLES",
    "ENV_AWS_ACCESS_KEY",
    "ENV_AWS_DEFAULT_REGION",
    "ENV_AWS_REGION",
    "ENV_AWS_SECRET_KEY",
    "ENV_AWS_SESSION_TOKEN",
    "ENV_CONFIG_PATH",
    "ENV_DEDUPE_BUFFER_SIZE",
    "ENV_LAKE_URI",
    "ENV_MAX_CONCURRENCY",
    "ENV_PROFILE_DIR",
    "ENV_S3_ENDPOINT",
    "ENV_SPARK_REMOTE",
    "HOUR_MS",
    "LOCAL_CONFIG",
    "LONG_MAX",
    "AirflowSettings",
    "CleanerSettings",
    "LakeConfig",
    "SparkSettings",
    "StorageSettings",
    "TopicConfig",
    "TopicSpec",
    "did_you_mean",
    "find_config",
    "is_local_master",
    "load_config",
    "locate_config",
    "parse_config",
    "sample_config_text",
    "shown",
    "spark_loopback_env",
]
