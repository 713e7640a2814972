"""Start-up file of the docs build's notebook kernels: keep each figure shown, and the claims.

The build sets ``PYTHONSTARTUP`` to this file (IPython runs it in every kernel it starts),
``POSENC_NOTEBOOK_OUTPUTS`` to a folder inside myst-nb's cache
(``posenc_figures.notebook_outputs_folder``) and ``POSENC_NOTEBOOK_PAGE`` to the page being run.
The kernel then keeps, as a gallery example's scrapers do (docs/dev/site-pipeline.md):

- ``figures/<sha256>.fig.pickle``: each figure it shows, where ``<sha256>`` is the hash of the
  PNG it sends. myst-nb names the image file after the same hash, so the build finds the pickle
  of each notebook image and re-renders it with its words translated. The PNG formatter of
  matplotlib's inline backend is wrapped through IPython's public display-formatter API.
- ``claims/<page>.claims.json``: the page's ``claims`` list, for the claims ledger, written after
  each cell that leaves one (and deleted when the page starts, so a page that stops testing claims
  leaves the ledger).

IPython runs a start-up file in the notebook's namespace, so everything here lives in one
function that deletes itself.
"""


def _keep_figures_and_claims() -> None:
    import base64
    import hashlib
    import json
    import os
    import pickle
    from pathlib import Path

    from IPython import get_ipython
    from matplotlib.figure import Figure

    shell = get_ipython()
    outputs = Path(os.environ["POSENC_NOTEBOOK_OUTPUTS"])
    folder = outputs / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    # Select the inline backend now, so that its PNG formatter exists before the first cell.
    shell.run_line_magic("matplotlib", "inline")
    png = shell.display_formatter.formatters["image/png"]

    def wrap_png_formatter(*_: object) -> None:
        inner = png.lookup_by_type(Figure)
        if getattr(inner, "keeps_pickle", False):
            return

        def png_keeping_pickle(fig: Figure) -> object:
            data = inner(fig)
            if data is None:  # an empty figure shows nothing
                return data
            raw = base64.b64decode(data) if isinstance(data, str) else data
            try:
                pickled = pickle.dumps(fig)
            except Exception as exc:  # lambdas in formatters, open files...
                raise RuntimeError(
                    f"a notebook figure cannot be pickled ({exc}); the build re-renders every figure "
                    "in each language from its pickle: use named functions rather than lambdas in it"
                ) from exc
            (folder / f"{hashlib.sha256(raw).hexdigest()}.fig.pickle").write_bytes(pickled)
            return data

        png_keeping_pickle.keeps_pickle = True  # type: ignore[attr-defined]
        png.for_type(Figure, png_keeping_pickle)

    wrap_png_formatter()
    # The backend registers its formatter again when its settings change: wrap it again.
    shell.events.register("pre_run_cell", wrap_png_formatter)

    page = os.environ["POSENC_NOTEBOOK_PAGE"]
    claims_file = outputs / "claims" / f"{page}.claims.json"
    claims_file.unlink(missing_ok=True)

    def keep_claims(*_: object) -> None:
        rows = shell.user_ns.get("claims")
        if rows is not None:
            claims_file.parent.mkdir(parents=True, exist_ok=True)
            data = {"example": Path(page).name, "rows": rows}
            claims_file.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")

    shell.events.register("post_run_cell", keep_claims)


_keep_figures_and_claims()
del _keep_figures_and_claims
