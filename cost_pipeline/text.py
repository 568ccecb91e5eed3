"""Characters a value from the data (a resource id, a search id, a model) may hold that an
output would act on rather than show: every output that writes such a value — the command's
check lines, the alerts, the Dagster UI's markdown — neutralizes the same ones."""

from __future__ import annotations

# C0 and C1 controls and DEL (a newline forges a line or ends a table row, ESC starts a
# terminal escape), and the line and paragraph separators (line breaks to Python's
# `splitlines` and to markdown)
CONTROLS = (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)
# bidirectional marks, embeddings, overrides and isolates: a right-to-left override shows
# everything after it reversed, the figures and a run id too
BIDI_CONTROLS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
# both as blanks, or dropped: a value reads as one run of text, in its own order
AS_TEXT = str.maketrans({**dict.fromkeys(CONTROLS, " "), **dict.fromkeys(BIDI_CONTROLS)})
