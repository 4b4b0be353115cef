"""`lakecleaner topics`: create, alter, list and describe topics."""

from __future__ import annotations

import click
from rich.table import Table

from lakecleaner.cli.base import Context, cli, parse_config_pairs, pass_ctx
from lakecleaner.cli.output import console
from lakecleaner.lake import Topic


@cli.group()
def topics() -> None:
    """Create, list and describe topics."""


@topics.command("create")
@click.argument("name")
@click.option("--partitions", type=int, help="Partition count (default: the config file's, else 1).")
@click.option("--config", "pairs", multiple=True, help="Topic-level config, key=value (repeatable).")
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic exists already.")
@pass_ctx
def topics_create(ctx: Context, name: str, partitions: int | None, pairs: tuple[str, ...], if_not_exists: bool) -> None:
    """Create topic NAME and its partitions."""
    existed = if_not_exists and name in ctx.lake.list_topics()
    topic = ctx.lake.create_topic(name, partitions, parse_config_pairs(pairs), exist_ok=if_not_exists)
    done = "exists" if existed else "created"
    ctx.emit(
        {**_describe(topic), "result": done},
        lambda: console.print(
            f"topic {topic.name} exists ({topic.partitions} partition(s)); nothing was changed"
            if existed
            else f"created topic {topic.name} with {topic.partitions} partition(s)"
        ),
    )


@topics.command("alter")
@click.argument("name")
@click.option("--config", "pairs", multiple=True, help="Topic-level config to set, key=value (repeatable).")
@click.option("--delete-config", "deletes", multiple=True, help="Topic-level key to remove (repeatable).")
@pass_ctx
def topics_alter(ctx: Context, name: str, pairs: tuple[str, ...], deletes: tuple[str, ...]) -> None:
    """Change topic NAME's stored config overrides."""
    changes: dict[str, object] = {**parse_config_pairs(pairs), **dict.fromkeys(deletes)}
    topic = ctx.lake.alter_topic(name, changes)
    ctx.emit(_describe(topic), lambda: console.print(f"altered topic {topic.name}"))


@topics.command("list")
@pass_ctx
def topics_list(ctx: Context) -> None:
    """List the lake's topics."""
    names = ctx.lake.list_topics()
    ctx.emit(names, lambda: console.print("\n".join(names) if names else "no topics in the lake"))


def _describe(topic: Topic) -> dict[str, object]:
    return {
        "topic": topic.name,
        "partitions": topic.partitions,
        "overrides": dict(topic.metadata.overrides),
        "config": topic.config.to_kafka_dict(),
    }


@topics.command("describe")
@click.argument("name")
@pass_ctx
def topics_describe(ctx: Context, name: str) -> None:
    """Show topic NAME's partitions and effective config."""
    topic = ctx.lake.topic(name)
    info = _describe(topic)

    def human() -> None:
        console.print(f"[bold]{topic.name}[/bold]  partitions={topic.partitions}")
        table = Table("config", "value", "source")
        yaml_spec = ctx.lake.config.topics.get(name)
        for key, value in topic.config.to_kafka_dict().items():
            if key in topic.metadata.overrides:
                source = "topic"
            elif yaml_spec and key in yaml_spec.overrides:
                source = "config file (topic)"
            else:
                source = "default"
            table.add_row(key, str(value), source)
        console.print(table)

    ctx.emit(info, human)
