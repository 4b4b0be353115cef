"""DAG files: the topics' DAGs spread over several files, so that Airflow parses each quickly and
its dag-processor parses them in parallel (issue 50).

One file holding every topic's DAG took 30 s to parse at 10,000 topics, past Airflow's
`dagbag_import_timeout`, and a file that times out has no DAG at all. Airflow's own advice for many
generated DAGs is several files, each building its share ("Dynamic DAG Generation"), and building
only the DAG a task needs when a worker parses the file to run it (`get_parsing_context`).

* A topic's file is `crc32(topic) mod N` of N files: stable across processes and Python versions,
  so a topic added to the config lands in one file and no other topic moves. DAG ids do not depend
  on the file (`dag_id_of`); changing N moves DAGs between files, never renames them.
* Every file is the same text (`DAG_FILE_TEXT`): its share is its name,
  `lakecleaner_topics_<i>_of_<N>.py`, which it reads from its own `__file__`. `write_dag_files`
  writes the N files and removes a folder's files of another N, so that no DAG is in two files.
* N is chosen for the lake (`auto_count`: about 300 topics a file, a power of two) or given.
* A file reads only its own topics from the config file (`load_config(keep_topic=...)`).
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

#: The files the repository's dags/ folder holds, and the image's: at 10,000 topics, about 313
#: topics a file, parsed in about 2.5 s on two cores (16 files of 625 took 4.2-5.9 s; bench/dags.py).
DEFAULT_DAG_FILES = 32
MAX_DAG_FILES = 4096
#: About how many topics `auto_count` puts in a file.
TOPICS_PER_FILE = 300
FILE_PREFIX = "lakecleaner_topics"
_FILE_NAME = re.compile(rf"{FILE_PREFIX}_(\d+)_of_(\d+)\.py")

#: Every DAG file's text: the share is the file's name.
DAG_FILE_TEXT = '''"""An Airflow DAG file of lakecleaner: the DAGs of the topics whose crc32 modulo N is i, where
this file is named lakecleaner_topics_<i>_of_<N>.py. Written by `lakecleaner airflow dag-files`.
"""

from lakecleaner.orchestration.dags import build_dag_file

globals().update(build_dag_file(__file__))
'''


@dataclass(frozen=True)
class DagFileShare:
    """File `index` of `count`: the topics whose DAGs it builds."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_DAG_FILES or not 0 <= self.index < self.count:
            raise ValueError(f"DAG file {self.index} of {self.count}: the count must be 1 to {MAX_DAG_FILES}")

    @staticmethod
    def of_file(path: str | Path) -> DagFileShare:
        """The share a DAG file's name gives (`lakecleaner_topics_<i>_of_<N>.py`); ValueError,
        naming the file and the fix, for any other name."""
        name = Path(path).name
        match = _FILE_NAME.fullmatch(name)
        if match is None:
            raise ValueError(
                f"DAG file {name}: its name must be {FILE_PREFIX}_<i>_of_<N>.py, which says its share of the "
                "topics; write the files with `lakecleaner airflow dag-files DIR`"
            )
        return DagFileShare(int(match.group(1)), int(match.group(2)))

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


def auto_count(topics: int) -> int:
    """How many files for `topics` topics: the power of two nearest to topics / 300 (so 200 to
    430 a file), at least 1 and at most MAX_DAG_FILES; 32 at 10,000 topics."""
    if topics <= TOPICS_PER_FILE:
        return 1
    return min(MAX_DAG_FILES, 1 << round(math.log2(topics / TOPICS_PER_FILE)))


def write_dag_files(folder: Path, count: int) -> tuple[list[Path], list[Path]]:
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
        if not path.is_file() or path.read_text() != DAG_FILE_TEXT:
            path.write_text(DAG_FILE_TEXT)
        written.append(path)
    return written, removed
