"""The program itself sets the cycle collector as components/common/gc_settings.py says, so
a real `pulumi preview`/`up` (which runs __main__.py in the language host, with no offline
preview around it) has them too; the offline preview gives them back afterwards."""

import contextlib
import gc
import runpy

from components.common import gc_settings
from preview import engine
from preview.engine import run_program
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR


def test_the_program_sets_the_collector_itself(monkeypatch):
    # The preview's own settings off: only what __main__.py does is seen.
    monkeypatch.setattr(engine, "_gc_settings", contextlib.nullcontext)
    seen = []

    def program() -> None:
        runpy.run_path(str(PROJECT_DIR / "__main__.py"), run_name="__main__")
        seen.append((gc.get_threshold(), gc.get_freeze_count()))

    thresholds = gc.get_threshold()
    try:
        run_program(PROJECT_DIR, read_stack(PROJECT_DIR, "lab"), program=program)
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    [(set_to, frozen)] = seen
    assert set_to == gc_settings.THRESHOLDS and frozen > 0


def test_the_preview_gives_the_callers_settings_back():
    thresholds = gc.get_threshold()
    run_program(PROJECT_DIR, read_stack(PROJECT_DIR, "lab"))
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0
