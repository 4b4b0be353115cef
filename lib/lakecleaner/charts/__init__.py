"""Charts drawn as inline SVG, with no JavaScript and no plotting library: the dashboard's pages
and the demo's HTML report draw the same ones.

    lines.py    a line chart of one or more series, and the overview's sparkline
    history.py  a topic's or a partition's history charts (issue 51), from its history points
    units.py    bytes and seconds for people
"""
