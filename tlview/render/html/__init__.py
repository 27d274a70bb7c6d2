"""The HTML pages: view models built in Python, drawn by templates/*.html.j2, one module a part."""
