"""Tables out (issue 48): each topic as an Iceberg table whose data files are the segment files
of its committed manifests, registered in place and moved by every commit."""
