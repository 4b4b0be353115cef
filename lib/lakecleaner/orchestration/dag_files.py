"""DAG files: the topics' DAGs spread over several files, so that Airflow parses each quickly and
its dag-processor parses them in parallel (issue 50).

One file holding every topic's DAG took 30 s to parse at 10,000 topics, past Airflow's
`dagbag_import_timeout`, and a file that times out has no DAG at all. Airflow's own advice for many
generated DAGs is several files, each building its share ("Dynamic DAG Generation"), and building
only the DAG a task needs when a worker parses the file to run it (`get_parsing_context`).

* A topic's file is `crc32(topic) mod N` of N files: stable across processes and Python versions,
  so a topic added to the config lands in one file and no other topic moves. DAG ids do not depend
  on the file (`dag_id_of`); changing N moves DAGs between files, never renames them.
* Each file is `lakecleaner_topics_<i>_of_<N>.py` and knows its own `i` and `N`; `write_dag_files`
  writes the N files and removes a folder's files of another N, so that no DAG is in two files.
* A file reads only its own topics from the config file (`load_config(keep_topic=...)`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

#: The files the repository's dags/ folder and the package's DAG folder hold: at 10,000 topics,
#: about 313 topics a file, parsed in about 2.5 s on two cores (16 files of 625 took 4.2-5.9 s; bench/dags.py).
DEFAULT_DAG_FILES = 32
MAX_DAG_FILES = 4096
FILE_PREFIX = "lakecleaner_topics"


@dataclass(frozen=True)
class DagFileShare:
    """File `index` of `count`: the topics whose DAGs it builds."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_DAG_FILES or not 0 <= self.index < self.count:
            raise ValueError(f"DAG file {self.index} of {self.count}: the count must be 1 to {MAX_DAG_FILES}")

    def holds(self, topic: str) -> bool:
        """Whether `topic`'s DAG is built by this file."""
        return file_index_of(topic, self.count) == self.index

    @property
    def file_name(self) -> str:
        width = len(str(self.count - 1))
        return f"{FILE_PREFIX}_{self.index:0{width}d}_of_{self.count}.py"


def file_index_of(topic: str, count: int) -> int:
    """The file (0 to count - 1) that builds `topic`'s DAG: crc32 of its UTF-8 name, modulo count."""
    return zlib.crc32(topic.encode()) % count


def dag_file_text(share: DagFileShare, config_beside: bool = False) -> str:
    """The text of `share`'s DAG file. With `config_beside`, a file that finds no config file through
    $LAKECLEANER_CONFIG reads `../config/lakecleaner.yaml` (a checkout's layout); else the package's
    search (`locate_config`: $LAKECLEANER_CONFIG, then ./lakecleaner.yaml)."""
    head = (
        f'"""Airflow DAG file {share.index} of {share.count}: the lakecleaner DAGs of the topics whose '
        f"crc32 modulo {share.count} is {share.index}.\n\n"
        "Written by `lakecleaner airflow dag-files`; the DAGs are built by lakecleaner.orchestration.dags.\n"
        '(Airflow\'s safe mode parses only files that mention both "airflow" and "dag".)\n"""\n\n'
    )
    if not config_beside:
        return head + (
            "from lakecleaner.orchestration.dags import build_dag_file\n\n"
            f"globals().update(build_dag_file({share.index}, {share.count}))\n"
        )
    return head + (
        "from pathlib import Path\n\n"
        "from lakecleaner.orchestration.dags import build_dag_file\n\n"
        'CONFIG_BESIDE = Path(__file__).parents[1] / "config" / "lakecleaner.yaml"\n'
        f"globals().update(build_dag_file({share.index}, {share.count}, fallback_config=CONFIG_BESIDE))\n"
    )


def write_dag_files(folder: Path, count: int, config_beside: bool = False) -> tuple[list[Path], list[Path]]:
    """Write the `count` DAG files into `folder` and remove its DAG files of another count (and the
    single `lakecleaner_topics.py` of earlier versions). Returns (written, removed)."""
    folder.mkdir(parents=True, exist_ok=True)
    shares = [DagFileShare(i, count) for i in range(count)]
    wanted = {share.file_name for share in shares}
    removed = [p for p in sorted(folder.glob(f"{FILE_PREFIX}*.py")) if p.name not in wanted]
    for path in removed:
        path.unlink()
    written = []
    for share in shares:
        path = folder / share.file_name
        text = dag_file_text(share, config_beside)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written, removed
