"""Per-topic summaries: what the lake-wide views read instead of every manifest (issue 50).

layout.py   where summaries and their pending markers live, and what a listing of markers says
entry.py    one partition's entry (the manifest's figures, its plan's gauges and reasons)
columns.py  the entries stored as columns, validated
model.py    a topic's summary
store.py    reading and writing summaries (conditional writes, never regressing), markers' clean-up
refresh.py  rebuilding a topic's summary from its manifests
read.py     a topic's facts from its summary, with stale partitions read from their manifests
partition_status.py  what `lakecleaner status` shows of a partition
facts.py    many topics' facts for the lake-wide views (summaries where current, manifests where not)
overview.py one topic's row of the overview (what is due, the nearest deadline, the trend)
"""
