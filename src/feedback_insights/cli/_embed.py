"""``feedback-insights embed``: the pipeline's vectors for a file of texts, as Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import (
    ConfigOption,
    IdFieldOption,
    InputFileOption,
    Refused,
    TextFieldOption,
    app,
    err,
    load_config,
    refuse_without_text,
)


@app.command("embed")
def embed_file(
    input: InputFileOption,
    output: Annotated[Path, typer.Option("--output", "-o", help="Parquet: one row per input, id and its 384-d float32 vector.")],
    text_field: TextFieldOption = "text",
    id_field: IdFieldOption = "id",
    config: ConfigOption = None,
) -> None:
    """Embed a file with the pipeline's embedder ([embedding]), without a warehouse; an input
    with no text gets a null vector. The model id is in the file's metadata."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..clusters import InputError, embed_inputs, embedder_for, read_inputs, write_vectors

    cfg = load_config(config)
    try:
        inputs = read_inputs(input, text_field, id_field)
    except InputError as exc:
        raise Refused(str(exc)) from None
    texts = int(inputs.get_column("text").is_not_null().sum())
    refuse_without_text(input, inputs.height, texts, text_field)
    embedder = embedder_for(cfg.embedding)
    with Progress(TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), console=err, transient=True) as progress:
        task = progress.add_task("embed", total=texts)
        table = embed_inputs(inputs, embedder, on_batch=lambda n: progress.advance(task, n))
    write_vectors(table, output, embedder.model_id)
    err.print(f"{inputs.height} inputs → {texts} vectors ({inputs.height - texts} without text) → {output}",
              highlight=False, markup=False)
