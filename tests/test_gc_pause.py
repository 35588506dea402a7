"""The collector is off inside compiles and back as it was after the outermost one."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

import grammask as gm
from grammask.errors import CompileTimeoutError
from grammask.gc_pause import collector_paused
from grammask.grammar.json_schema.emit import Emitter


def test_nested_pauses_restore_the_collector_once():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still runs
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off():
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_pause_ends_when_the_last_thread_leaves():
    entered, release = threading.Event(), threading.Event()

    def hold():
        with collector_paused():
            entered.set()
            release.wait(10)

    worker = threading.Thread(target=hold)
    worker.start()
    entered.wait(10)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread's pause goes on
    release.set()
    worker.join(10)
    assert gc.isenabled()


def test_the_collector_is_off_while_a_schema_is_read_and_back_after(monkeypatch):
    seen = []
    original = Emitter.finish

    def finish(self, *args):
        seen.append(gc.isenabled())
        return original(self, *args)

    monkeypatch.setattr(Emitter, "finish", finish)
    gm.Grammar.from_json_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert seen == [False] and gc.isenabled()


class _Built:
    """Stands for what a compile has built when its deadline passes."""


def _stopped_compile(keep: list, error: Exception) -> None:
    built = _Built()
    keep.append(weakref.ref(built))
    raise error


@pytest.mark.parametrize(("error", "freed"), [(CompileTimeoutError("g", "the token verdicts", 1.0), True),
                                              (ValueError("other errors keep their frames"), False)])
def test_a_timed_out_compile_frees_what_it_built_before_the_collector_runs(error, freed):
    refs: list = []
    with pytest.raises(type(error)) as info, collector_paused():
        _stopped_compile(refs, error)
    assert info.value.__traceback__ is not None
    assert (refs[0]() is None) == freed
