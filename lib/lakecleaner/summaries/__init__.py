"""Per-topic summaries: what the lake-wide views read instead of every manifest (issue 50).

layout.py   where summaries and their pending markers live
model.py    a topic's summary (per partition: the manifest's figures and its plan's gauges)
markers.py  the pending markers commits leave, and what they say is stale
store.py    reading and writing summaries (conditional writes, never regressing)
refresh.py  rebuilding a topic's summary from its manifests
read.py     a topic's facts from its summary, with stale partitions read from their manifests
"""
