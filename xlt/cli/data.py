"""``xlt data fetch`` and ``xlt data list``: the data recipes of ``xlt/data/recipe_files/``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from xlt.cli import XltGroup
from xlt.cli.options import OutputPath
from xlt.utils import log

_DATA_HELP = "Where data sets are laid out [env XLT_DATA; default: $XDG_CACHE_HOME/xlt or ~/.cache/xlt]."


@click.group("data", cls=XltGroup)
def data() -> None:
    """Fetch and check the data sets that xlt's pipelines use (one recipe per data set).

    Files come from the local mirror (XLT_DATA_MIRROR, default ../shared/data beside the
    checkout) or else from their official URL; every file is checked against the sha256 in its
    recipe and laid out under XLT_DATA (default ~/.cache/xlt) at the mirror's relative path.

    \b
    Example:
      xlt data list
      xlt data fetch ud_en_ewt xnli
      XLT_DATA_MIRROR= xlt data fetch all     # official URLs only
    """


@data.command("fetch")
@click.argument("names", nargs=-1, required=True, metavar="NAME...|all")
@click.option("--data-dir", type=OutputPath("directory", path_type=Path), default=None, metavar="DIR",
              help=_DATA_HELP)
@click.option("--mirror", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Local mirror to copy from [env XLT_DATA_MIRROR, set it empty for none; default: ../shared/data].")
def fetch(names: tuple[str, ...], data_dir: Optional[Path], mirror: Optional[Path]) -> None:
    """Fetch data sets by recipe name (`all`: every recipe marked in_all), checking sha256.

    A NAME may also be the path of a file a recipe lays out: that file's recipe.

    Files already present with the right checksum are skipped, so running it again is fast.
    A file found in neither the mirror nor at its URL is an error that says where to get it.

    \b
    Example:
      xlt data fetch all
      xlt data fetch mnli_full --data-dir /scratch/xlt-data
      xlt data fetch nli/snli/snli_dev.tsv      # the recipe snli
    """
    from xlt.data.recipes import fetch as fetch_recipes, named_mirror

    report = fetch_recipes(list(names), data=data_dir, mirror="env" if mirror is None else named_mirror(str(mirror)))
    log.info(f"{len(report.present)} already present, {len(report.from_mirror)} copied from the mirror, "
             f"{len(report.downloaded)} downloaded, {len(report.prepared)} prepared"
             + (f", {len(report.unverified)} unverified (no checksum in the recipe)" if report.unverified else ""))


@data.command("list")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help=_DATA_HELP)
def list_recipes(data_dir: Optional[Path]) -> None:
    """Show the recipes, their licences and how many of their files are present.

    Presence is checked by existence and size; `xlt data fetch` verifies checksums.

    \b
    Example:
      xlt data list
    """
    from xlt.data.recipes import data_dir as default_data_dir
    from xlt.data.recipes import load_recipes, mirror_dir, status

    rows = status(load_recipes(), data_dir)
    click.echo(f"data directory: {data_dir or default_data_dir()}    mirror: {mirror_dir() or 'none'}")
    click.echo(f"{'name':<15} {'all':<4} {'present':>8} {'MB':>7}  licence")
    for row in rows:
        size = "?" if row.size is None else f"{row.size / 1e6:.1f}"
        click.echo(f"{row.recipe.name:<15} {'yes' if row.recipe.in_all else 'no':<4} "
                   f"{row.present:>3}/{row.total:<4} {size:>7}  {row.recipe.licence}")
