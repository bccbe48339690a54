"""Sphinx configuration of the course's static site (built by `python -m graphcourse.authoring.site`, `make site`).

The sources are a staged copy of the lessons, exercises and docs (graphcourse.authoring.site writes
them); nothing is executed: every output shown is the one stored in the notebook.
"""

project = "CUDA graphs, an interactive course"
author = "the course's authors"
copyright = "the course's authors"

extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]

# Outputs as stored (executed on the GPU named on each lesson): never run at build time.
nb_execution_mode = "off"
nb_merge_streams = True
# Widgets are shown as the static outputs the site builder unfolds from their saved state;
# no widget JavaScript is loaded (it would come from a CDN, and the site works offline).
nb_ipywidgets_js = {}
myst_enable_extensions = ["colon_fence", "html_image"]
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "show_navbar_depth": 1,
}
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
# Offline: no MathJax from a CDN (the lessons carry no maths).
mathjax_path = "mathjax-is-not-bundled.js"  # a page with maths would fail the link check: bundle MathJax first
suppress_warnings = ["mystnb.unknown_mime_type"]
